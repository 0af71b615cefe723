/*
 * meridian-http-test: the tiny HTTP server of the end-to-end tests.
 *
 *   GET /            200 "hello from <hostname>"
 *   GET /ready       200 "ready", or 503 "not ready" once readiness is failed
 *   GET /live        200 "live" (for liveness probes)
 *   GET|POST /ready/fail   readiness fails from now on (probes see 503)
 *   GET|POST /ready/ok     readiness recovers
 *   anything else    404
 *
 * It listens on [::]:$PORT (default 8080; IPv4 too), logs one line per
 * request to stdout ("GET /ready 200", for `kubectl logs`) and exits 0 on
 * SIGTERM/SIGINT (after $STOP_DELAY_SECONDS more of serving, when set: the
 * drain a real app gives its clients' load balancers to see it go).
 * Readiness starts failed when $START_UNREADY is set.
 *
 * `http-test ready fail|ok [PORT]` flips the readiness of the server running
 * beside it (for `kubectl exec`, since the image has no shell).
 *
 * `http-test get HOST[:PORT][/PATH]` is the client side, as an app calls a
 * Service by name: HOST is resolved by the libc resolver with the pod's
 * /etc/resolv.conf (search paths, ndots), each address is tried in order,
 * and the body of `GET PATH` is printed. Exits 0 on a 200, 1 on another
 * status or a failed connection, 2 when the name does not resolve; the
 * address used (or the resolver's error) goes to stderr.
 *
 * Requests are served one at a time with short socket timeouts: enough for
 * probes and tests. Built statically, so the image is this one file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;
static int ready = 1;

/* Seconds to keep serving after SIGTERM ($STOP_DELAY_SECONDS), then 0. */
static volatile unsigned stop_delay = 0;

static void on_alarm(int sig) {
    (void)sig;
    stopping = 1;
}

static void on_stop(int sig) {
    (void)sig;
    if (stop_delay > 0) {
        alarm(stop_delay); /* on_alarm stops the server then */
        stop_delay = 0;
    } else {
        stopping = 1;
    }
}

static int port_from(const char *text) {
    long port = text ? strtol(text, NULL, 10) : 0;
    return (port > 0 && port < 65536) ? (int)port : 8080;
}

static void respond(int fd, int status, const char *body) {
    const char *reason = status == 200 ? "OK" : status == 503 ? "Service Unavailable" : "Not Found";
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, strlen(body));
    if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0) {
        /* The client went away: nothing to do. */
    }
}

static void serve(int fd, const char *hostname) {
    char request[4096];
    size_t len = 0;
    while (len < sizeof request - 1) {
        ssize_t got = read(fd, request + len, sizeof request - 1 - len);
        if (got <= 0) {
            break;
        }
        len += (size_t)got;
        request[len] = '\0';
        if (strstr(request, "\r\n\r\n") || strstr(request, "\n\n")) {
            break;
        }
    }
    request[len] = '\0';
    char method[16] = "", path[1024] = "";
    if (sscanf(request, "%15s %1023s", method, path) != 2) {
        return;
    }
    char *query = strchr(path, '?');
    if (query) {
        *query = '\0';
    }
    char body[512];
    int status = 200;
    if (strcmp(path, "/") == 0) {
        snprintf(body, sizeof body, "hello from %s\n", hostname);
    } else if (strcmp(path, "/ready") == 0) {
        status = ready ? 200 : 503;
        snprintf(body, sizeof body, "%s\n", ready ? "ready" : "not ready");
    } else if (strcmp(path, "/live") == 0) {
        snprintf(body, sizeof body, "live\n");
    } else if (strcmp(path, "/ready/fail") == 0) {
        ready = 0;
        snprintf(body, sizeof body, "readiness now fails\n");
    } else if (strcmp(path, "/ready/ok") == 0) {
        ready = 1;
        snprintf(body, sizeof body, "readiness now succeeds\n");
    } else {
        status = 404;
        snprintf(body, sizeof body, "not found\n");
    }
    respond(fd, status, body);
    printf("%s %s %d\n", method, path, status);
    fflush(stdout);
}

/* `http-test ready fail|ok [PORT]`: asks the local server to flip readiness. */
static int flip(const char *what, const char *port_text) {
    if (strcmp(what, "fail") != 0 && strcmp(what, "ok") != 0) {
        fprintf(stderr, "usage: http-test ready fail|ok [PORT]\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port_from(port_text))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("http-test: connect");
        return 1;
    }
    char request[128];
    int n = snprintf(request, sizeof request, "POST /ready/%s HTTP/1.0\r\n\r\n", what);
    if (write(fd, request, (size_t)n) != n) {
        perror("http-test: write");
        return 1;
    }
    char reply[512];
    ssize_t got = read(fd, reply, sizeof reply - 1);
    if (got <= 0) {
        perror("http-test: read");
        return 1;
    }
    reply[got] = '\0';
    char *body = strstr(reply, "\r\n\r\n");
    fputs(body ? body + 4 : reply, stdout);
    return strncmp(reply, "HTTP/1.1 200", 12) == 0 ? 0 : 1;
}

/* `http-test get HOST[:PORT][/PATH]`: GET from a server found by name. */
static int get(const char *target) {
    char host[256], port[8] = "80", path[1024] = "/";
    const char *slash = strchr(target, '/');
    size_t host_len = slash ? (size_t)(slash - target) : strlen(target);
    if (host_len == 0 || host_len >= sizeof host || (slash && strlen(slash) >= sizeof path)) {
        fprintf(stderr, "usage: http-test get HOST[:PORT][/PATH]\n");
        return 2;
    }
    memcpy(host, target, host_len);
    host[host_len] = '\0';
    if (slash) {
        strcpy(path, slash);
    }
    char *colon = strrchr(host, ':');
    if (colon) {
        *colon = '\0';
        snprintf(port, sizeof port, "%d", port_from(colon + 1));
    }
    /* Linked statically, getaddrinfo still works in this FROM-scratch
     * image: glibc 2.34+ has its files and dns lookups built in (the
     * linker's warning is about other NSS modules, which are not used). */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
    int error = getaddrinfo(host, port, &hints, &found);
    if (error != 0) {
        fprintf(stderr, "http-test: %s does not resolve: %s\n", host, gai_strerror(error));
        return 2;
    }
    int fd = -1;
    char address[INET6_ADDRSTRLEN] = "";
    struct timeval timeout = {.tv_sec = 5};
    for (struct addrinfo *ai = found; ai && fd < 0; ai = ai->ai_next) {
        const void *ip = ai->ai_family == AF_INET
                             ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                             : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        inet_ntop(ai->ai_family, ip, address, sizeof address);
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            fprintf(stderr, "http-test: connecting to %s port %s: %s\n", address, port, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0) {
        return 1;
    }
    fprintf(stderr, "http-test: %s resolved, connected to %s port %s\n", host, address, port);
    char request[1400];
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);
    if (write(fd, request, (size_t)n) != n) {
        perror("http-test: write");
        close(fd);
        return 1;
    }
    char reply[8192];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof reply - 1 && (got = read(fd, reply + len, sizeof reply - 1 - len)) > 0) {
        len += (size_t)got;
    }
    close(fd);
    reply[len] = '\0';
    int status = 0;
    if (sscanf(reply, "HTTP/%*s %d", &status) != 1) {
        fprintf(stderr, "http-test: no HTTP response from %s\n", address);
        return 1;
    }
    char *body = strstr(reply, "\r\n\r\n");
    fputs(body ? body + 4 : "", stdout);
    return status == 200 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "ready") == 0) {
        return flip(argv[2], argc >= 4 ? argv[3] : getenv("PORT"));
    }
    if (argc == 3 && strcmp(argv[1], "get") == 0) {
        return get(argv[2]);
    }
    int port = port_from(getenv("PORT"));
    if (getenv("START_UNREADY")) {
        ready = 0;
    }
    char hostname[256] = "unknown";
    gethostname(hostname, sizeof hostname - 1);

    const char *delay = getenv("STOP_DELAY_SECONDS");
    long delay_secs = delay ? strtol(delay, NULL, 10) : 0;
    stop_delay = (delay_secs > 0 && delay_secs < 3600) ? (unsigned)delay_secs : 0;
    struct sigaction stop = {.sa_handler = on_stop}; /* no SA_RESTART: accept returns EINTR */
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    struct sigaction alarmed = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &alarmed, NULL);
    signal(SIGPIPE, SIG_IGN);

    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    int family = AF_INET6;
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        family = AF_INET;
    }
    int yes = 1, no = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    int bound;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
        struct sockaddr_in6 addr = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
        addr.sin6_addr = in6addr_any;
        bound = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    } else {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
        bound = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    }
    if (bound < 0 || listen(fd, 64) < 0) {
        perror("http-test: listen");
        return 1;
    }
    printf("http-test listening on :%d as %s (ready=%d)\n", port, hostname, ready);
    fflush(stdout);
    struct timeval timeout = {.tv_sec = 2};
    while (!stopping) {
        int client = accept(fd, NULL, NULL);
        if (client < 0) {
            if (errno == EINTR) {
                continue;
            }
            perror("http-test: accept");
            continue;
        }
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        serve(client, hostname);
        close(client);
    }
    printf("http-test stopping\n");
    return 0;
}

/*
 * Meridian's pause container: the process that holds a pod's namespaces.
 *
 * It sleeps until SIGTERM or SIGINT (then exits 0) and reaps any child that
 * is re-parented to it (it is PID 1 of the pod when the PID namespace is
 * shared). Built statically, so the image is this one file (FROM scratch).
 * Same behaviour as Kubernetes' build/pause/linux/pause.c, written anew.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("meridian-pause 1");
        return 0;
    }
    if (getpid() != 1) {
        fprintf(stderr, "meridian-pause: warning: not PID 1\n");
    }
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0) {
        perror("meridian-pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
}

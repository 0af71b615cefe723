//! The connection shape flags the streaming benchmarks share: a mesh of
//! proxies (`--shape proxy`, the default: 2,500 connections × 4 streams)
//! or the first benchmark's shape (`--shape legacy`: 10,000 streams over
//! 50 connections), either one overridden by `--connections` and
//! `--streams-per-connection`.

/// What the connections look like.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Shape {
    /// 2,500 proxy connections × 4 streams (a mesh of 2,500 proxies).
    Proxy,
    /// 10,000 streams over 50 connections (the first benchmark's shape).
    Legacy,
}

/// `--shape`, `--connections`, `--streams-per-connection`.
#[derive(Clone, Debug, clap::Args)]
pub struct ShapeArgs {
    /// The shape's defaults; every other flag overrides one of them.
    #[arg(long, value_enum, default_value = "proxy")]
    pub shape: Shape,
    /// HTTP/2 connections (proxies).
    #[arg(long)]
    pub connections: Option<usize>,
    /// Streams per connection (`Get` for the destination, `WatchPort` for
    /// the policy controller).
    #[arg(long)]
    pub streams_per_connection: Option<usize>,
}

impl ShapeArgs {
    /// Connections (at least one) and streams per connection: the flags,
    /// else the shape's.
    pub fn connections(&self) -> (usize, usize) {
        let (connections, per_connection) = match self.shape {
            Shape::Proxy => (2_500, 4),
            Shape::Legacy => (50, 200),
        };
        (
            self.connections.unwrap_or(connections).max(1),
            self.streams_per_connection.unwrap_or(per_connection),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_shape() {
        let args = |shape, connections, streams_per_connection| ShapeArgs {
            shape,
            connections,
            streams_per_connection,
        };
        assert_eq!(args(Shape::Proxy, None, None).connections(), (2_500, 4));
        assert_eq!(args(Shape::Legacy, None, None).connections(), (50, 200));
        assert_eq!(args(Shape::Proxy, Some(0), Some(2)).connections(), (1, 2));
    }
}

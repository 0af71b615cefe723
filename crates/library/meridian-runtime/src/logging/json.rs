//! The `--log-format=json` line: the keys of the Go controllers' JSON
//! (logrus's `time`, `level`, `msg`, with logrus's level names), then the
//! event's own fields beside them, then where it came from (`target`, and
//! the open spans under `spans`).
//!
//! A field whose name is one of those keys is written `fields.<name>`, as
//! logrus writes a field that would clash with its own.

use std::fmt;

use serde_json::{Map, Value};
use tracing::{Event, Level, Subscriber, field::Field};
use tracing_subscriber::{
    fmt::{
        FmtContext, FormatEvent, FormatFields, FormattedFields,
        format::Writer,
        time::{FormatTime, SystemTime},
    },
    registry::LookupSpan,
};

/// Keys the line itself writes; an event field of the same name is
/// written `fields.<name>`.
const RESERVED: &[&str] = &["time", "level", "msg", "target", "spans"];

/// The JSON event formatter (one object per line).
#[derive(Clone, Copy, Debug, Default)]
pub struct GoJson;

/// logrus's name for a level (`warning`, not `warn`).
pub fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warning",
        Level::ERROR => "error",
    }
}

impl<S, N> FormatEvent<S, N> for GoJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();

        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        let mut line = Map::new();
        line.insert("time".into(), Value::String(time));
        line.insert("level".into(), level_name(meta.level()).into());
        line.insert(
            "msg".into(),
            Value::String(fields.message.take().unwrap_or_default()),
        );
        // Events bridged from the `log` crate name their origin in fields.
        let target = fields
            .log_target
            .take()
            .unwrap_or_else(|| meta.target().to_string());
        for (name, value) in fields.values {
            let key = if RESERVED.contains(&name.as_str()) {
                format!("fields.{name}")
            } else {
                name
            };
            line.insert(key, value);
        }
        line.insert("target".into(), Value::String(target));
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<Value> = scope
                .from_root()
                .map(|span| {
                    let mut object = Map::new();
                    object.insert("name".into(), span.name().into());
                    let extensions = span.extensions();
                    if let Some(formatted) = extensions.get::<FormattedFields<N>>() {
                        match serde_json::from_str::<Map<String, Value>>(formatted.as_str()) {
                            Ok(map) => object.extend(map),
                            Err(_) if formatted.is_empty() => {}
                            Err(_) => {
                                object.insert("fields".into(), formatted.as_str().into());
                            }
                        }
                    }
                    Value::Object(object)
                })
                .collect();
            if !spans.is_empty() {
                line.insert("spans".into(), Value::Array(spans));
            }
        }
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's fields as JSON values, its message apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    log_target: Option<String>,
    values: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        match field.name() {
            "message" => {
                self.message = Some(match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                })
            }
            "log.target" => self.log_target = value.as_str().map(str::to_string),
            name if name.starts_with("log.") => {}
            name => self.values.push((name.to_string(), value)),
        }
    }
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

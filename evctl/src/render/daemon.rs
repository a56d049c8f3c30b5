//! What the daemon verbs print: `status` (pid, version, uptime, the stores held) and one line of
//! `watch`.
//!
//! Pure formatting: it must not talk to evd.

use proto::json::q;
use proto::rpc::DaemonStatus;

use super::out::Out;

fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{}.{:01}s", s, (ms % 1000) / 100),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub fn status(s: &DaemonStatus, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(s);
        return out;
    }
    out.line(format!(
        "evd pid {}  version {}  protocol {}  up {}",
        s.pid,
        s.version,
        s.protocol,
        human_ms(s.uptime_ms)
    ));
    out.line(format!("socket   {}", s.socket));
    out.line(format!("build    {}", s.build_id));
    out.line(match (&s.host.id, &s.host.error) {
        (Some(id), _) => format!("host     {id} (from {})", s.host.from),
        (None, Some(e)) => format!("host     none: {e}"),
        (None, None) => "host     unknown (an evd of an older build)".to_string(),
    });
    let r = &s.resources;
    out.line(format!(
        "holds    {} thread(s)  {} fd(s)  {} RSS  {} inotify instance(s) / {} watch(es)  {} connection(s)",
        r.threads,
        r.open_fds,
        human_bytes(r.rss_bytes),
        r.inotify_instances,
        r.inotify_watches,
        r.connections
    ));
    if s.stores.is_empty() {
        out.line("stores   none open yet");
    } else {
        out.line(format!("stores   {}", s.stores.len()));
        for st in &s.stores {
            let head = if st.head.is_empty() {
                "-"
            } else {
                st.head.as_str()
            };
            out.line(format!(
                "  {}  {} tick(s)  head {}  {} write(s) since {}  idle {}",
                st.root,
                st.ticks,
                head,
                st.writes,
                st.opened_at,
                human_ms(st.idle_ms)
            ));
            if !st.watch.is_empty() {
                out.line(format!("    {}", st.watch));
            }
            for note in &st.notes {
                out.line(format!("    note: {note}"));
            }
            if let Some(b) = &st.busy {
                out.line(format!(
                    "    {} `{}` for {}{}",
                    if b.stuck { "STUCK on" } else { "busy with" },
                    b.what,
                    human_ms(b.running_ms),
                    if b.stuck {
                        " (past its deadline: its requests are refused at once; `evctl shutdown` frees it)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    out
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{} KiB", n / 1024)
    }
}

/// One pushed event as `evctl watch` prints it: like a check row, with what it was before
/// (`gone` when the ground left the view), or a `resync` line.
pub fn watch_line(ev: &proto::rpc::WatchEvent, json: bool) -> String {
    use proto::rpc::WatchEvent;
    if json {
        return serde_json::to_value(ev)
            .map(|v| proto::json::compact(&v))
            .unwrap_or_default();
    }
    match ev {
        WatchEvent::Changed(c) => format!(
            "{}\t{}\t{}\t(was {})",
            c.new.as_deref().unwrap_or("gone"),
            c.tick_id,
            q(&c.claim),
            c.old.as_deref().unwrap_or("not in view")
        ),
        WatchEvent::Resync { reason } => format!("resync\t-\t-\t({reason})"),
    }
}

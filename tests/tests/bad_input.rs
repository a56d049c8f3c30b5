//! The daemon survives anything a client can send, and every bad input gets a clear answer.
//! Raw cases talk to the socket directly with plain HTTP/1.1 (jsonrpsee serves HTTP and
//! WebSocket on the same socket); store damage goes through evctl. After every case the same
//! daemon still answers for a second, healthy store.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use evd_e2e::{Repo, World};

/// A world whose daemon serves a healthy store (one decision) and a scratch store.
struct Fixture {
    w: World,
    healthy: Repo,
    scratch: Repo,
    healthy_list: String,
    pid: u32,
}

impl Fixture {
    fn new() -> Fixture {
        let w = World::new();
        let healthy = Repo::new();
        let scratch = Repo::new();
        w.evctl(healthy.path(), &["init"]).ok();
        let r = w
            .evctl(
                healthy.path(),
                &[
                    "decide",
                    "stay healthy",
                    "--assume",
                    "a",
                    "--blame",
                    "Tester",
                ],
            )
            .ok();
        let id = &r.stdout[9..21];
        let healthy_list = format!("{id}\tlive\t\"stay healthy\"\n");
        assert_eq!(w.evctl(healthy.path(), &["list"]).ok().stdout, healthy_list);
        w.evctl(scratch.path(), &["init"]).ok();
        let pid = w.daemon_pid().expect("a daemon runs");
        Fixture {
            w,
            healthy,
            scratch,
            healthy_list,
            pid,
        }
    }

    /// The same daemon still answers, and serves the healthy store correctly.
    fn still_serving(&self, case: &str) {
        assert_eq!(
            self.w.daemon_pid(),
            Some(self.pid),
            "after {case}: the same evd must still answer"
        );
        let r = self.w.evctl(self.healthy.path(), &["list"]);
        assert_eq!(
            (r.code, r.stdout.as_str()),
            (0, self.healthy_list.as_str()),
            "after {case}: the healthy store must still be served: {r:?}"
        );
        assert_eq!(self.w.daemon_pid(), Some(self.pid), "after {case}");
    }

    fn store(&self, repo: &Repo) -> String {
        repo.path().display().to_string()
    }
}

fn connect(sock: &Path) -> UnixStream {
    let s = UnixStream::connect(sock).expect("connect to evd.sock");
    // A guard against a daemon that never answers (not a timing assertion).
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    s.set_write_timeout(Some(Duration::from_secs(30)))
        .expect("write timeout");
    s
}

/// Read until the peer closes (or resets) the connection; whatever arrived is returned.
fn read_all(s: &mut UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!(
                    "evd did not finish its answer: got {:?}",
                    String::from_utf8_lossy(&out)
                )
            }
            Err(_) => break, // reset after the answer: keep what arrived
        }
    }
    out
}

/// Send `bytes`, optionally half-close, and read whatever comes back. A write the daemon cut
/// short (it may close early on input it refuses) is not an error here.
fn exchange(sock: &Path, bytes: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = connect(sock);
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    read_all(&mut s)
}

/// An HTTP/1.1 answer: status code and body.
#[derive(Debug)]
struct Http {
    status: u16,
    body: String,
}

fn parse_http(raw: &[u8]) -> Option<Http> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .lines()
        .next()?
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    Some(Http {
        status,
        body: body.to_string(),
    })
}

fn post_raw(sock: &Path, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    exchange(sock, &req, false)
}

/// POST `body` and parse the JSON-RPC answer.
fn post(sock: &Path, body: &str) -> (u16, serde_json::Value) {
    let raw = post_raw(sock, body.as_bytes());
    let http = parse_http(&raw)
        .unwrap_or_else(|| panic!("not an HTTP answer: {:?}", String::from_utf8_lossy(&raw)));
    let v = serde_json::from_str(&http.body)
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", http.body));
    (http.status, v)
}

fn call(method: &str, params: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
}

/// Assert a JSON-RPC error answer with `code`; returns its message.
fn expect_error(v: &serde_json::Value, code: i64) -> String {
    assert!(v.get("result").is_none(), "must not be served: {v}");
    assert_eq!(v["error"]["code"].as_i64(), Some(code), "{v}");
    let msg = v["error"]["message"].as_str().expect("error message");
    assert!(!msg.is_empty(), "{v}");
    msg.to_string()
}

// Raw JSON-RPC ---------------------------------------------------------------------------------

#[test]
fn a_well_formed_call_is_served_over_plain_http() {
    // The baseline the refusals below are compared against.
    let f = Fixture::new();
    let (status, v) = post(
        &f.w.socket(),
        &call(
            "ev.list",
            serde_json::json!([{"context": {"store": f.store(&f.healthy)}}]),
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["entries"][0]["decision"], "stay healthy", "{v}");
    f.still_serving("a plain HTTP call");
}

#[test]
fn bytes_that_are_not_json_are_a_parse_error() {
    let f = Fixture::new();
    for body in ["not json at all", "{\"jsonrpc\":\"2.0\",", "\u{0}\u{1}{]"] {
        let (status, v) = post(&f.w.socket(), body);
        assert!(
            status == 200 || status == 400,
            "{body:?}: HTTP {status}: {v}"
        );
        expect_error(&v, -32700);
        f.still_serving(&format!("non-JSON body {body:?}"));
    }
}

#[test]
fn wrong_params_are_invalid_params_with_a_message() {
    let f = Fixture::new();
    let store = f.store(&f.healthy);
    let cases = [
        ("ev.list", serde_json::json!([{"nope": 1}]), "nope"),
        ("ev.list", serde_json::json!(["a string"]), "invalid type"),
        ("ev.list", serde_json::json!(5), "Invalid params"),
        (
            "ev.list",
            serde_json::json!([{"context": {"store": 12}}]),
            "invalid type",
        ),
        (
            "ev.show",
            serde_json::json!([{"context": {"store": store}, "id": 12}]),
            "invalid type",
        ),
        ("ev.list", serde_json::json!([]), "Invalid params"),
        (
            "ev.decide",
            serde_json::json!([{"context": {"store": store}, "grounds": "x"}]),
            "invalid type",
        ),
    ];
    for (method, params, hint) in cases {
        let (status, v) = post(&f.w.socket(), &call(method, params.clone()));
        assert_eq!(status, 200, "{method} {params}: {v}");
        expect_error(&v, -32602);
        // The detail (serde's words) travels in `data`; message + data must explain.
        let detail = format!("{} {}", v["error"]["message"], v["error"]["data"]);
        assert!(detail.contains(hint), "{method} {params}: {v}");
        f.still_serving(&format!("{method} with params {params}"));
    }
    assert_eq!(f.healthy.tick_files().len(), 1, "nothing was written");
}

#[test]
fn an_unknown_method_is_method_not_found() {
    let f = Fixture::new();
    for method in ["ev.nope", "list", "rpc.discover", ""] {
        let (_, v) = post(&f.w.socket(), &call(method, serde_json::json!([])));
        expect_error(&v, -32601);
        f.still_serving(&format!("unknown method {method:?}"));
    }
}

#[test]
fn a_request_body_over_the_limit_is_refused_not_served() {
    let f = Fixture::new();
    // A valid ev.list call padded with whitespace: served, it would return the healthy list.
    let head = call(
        "ev.list",
        serde_json::json!([{"context": {"store": f.store(&f.healthy)}}]),
    );
    let mut body = head[..head.len() - 1].to_string();
    body.push_str(&" ".repeat(proto::rpc::MAX_REQUEST_BYTES as usize + 16));
    body.push('}');
    serde_json::from_str::<serde_json::Value>(&body).expect("the padded body is valid JSON");
    let raw = post_raw(&f.w.socket(), body.as_bytes());
    if !raw.is_empty() {
        let http = parse_http(&raw)
            .unwrap_or_else(|| panic!("not an HTTP answer: {:?}", String::from_utf8_lossy(&raw)));
        if http.status == 200 {
            let v: serde_json::Value = serde_json::from_str(&http.body).expect("JSON body");
            assert!(
                v.get("result").is_none() && v.get("error").is_some(),
                "served: {v}"
            );
        } else {
            assert_eq!(http.status, 413, "{http:?}");
        }
        assert!(!http.body.contains("stay healthy"), "served: {http:?}");
    }
    f.still_serving("a body over the request limit");
}

#[test]
fn show_with_a_path_for_an_id_is_not_found() {
    let f = Fixture::new();
    for id in ["../../etc/passwd", "/etc/passwd", "..", "ABCDEF012345", ""] {
        let (_, v) = post(
            &f.w.socket(),
            &call(
                "ev.show",
                serde_json::json!([{"context": {"store": f.store(&f.healthy)}, "id": id}]),
            ),
        );
        let msg = expect_error(&v, -32041);
        assert_eq!(msg, format!("no tick with id {id}"));
        f.still_serving(&format!("ev.show {id:?}"));
    }
    // The same through evctl.
    let r = f.w.evctl(f.healthy.path(), &["show", "../../etc/passwd"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "error: no tick with id ../../etc/passwd\n");
    f.still_serving("evctl show ../../etc/passwd");
}

#[test]
fn a_relative_or_missing_store_path_is_a_clear_refusal() {
    let f = Fixture::new();
    let missing = f.w.home.path().join("no/such/dir").display().to_string();
    let cases = [
        ("relative/path", "store path must be absolute"),
        (".", "store path must be absolute"),
        ("", "store path must be absolute"),
        (missing.as_str(), "cannot open store directory"),
    ];
    for (store, want) in cases {
        for method in ["ev.list", "ev.log", "ev.init", "ev.verify"] {
            let (_, v) = post(
                &f.w.socket(),
                &call(method, serde_json::json!([{"context": {"store": store}}])),
            );
            let msg = expect_error(&v, -32045);
            assert!(msg.contains(want), "{method} {store:?}: {msg}");
            f.still_serving(&format!("{method} on store {store:?}"));
        }
    }
    assert!(!Path::new(&missing).exists(), "ev.init did not create it");
}

#[test]
fn a_store_whose_evolving_is_a_symlink_is_refused() {
    let f = Fixture::new();
    let linked = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(f.healthy.ev_dir(), linked.path().join(".evolving"))
        .expect("symlink .evolving");
    let store = linked.path().display().to_string();
    for method in ["ev.list", "ev.log", "ev.verify", "ev.init"] {
        let (_, v) = post(
            &f.w.socket(),
            &call(method, serde_json::json!([{"context": {"store": store}}])),
        );
        let msg = expect_error(&v, -32045);
        assert!(msg.contains("symlink"), "{method}: {msg}");
        f.still_serving(&format!("{method} through a symlinked .evolving"));
    }
    let r = f.w.evctl(
        linked.path(),
        &[
            "decide",
            "through the link",
            "--assume",
            "a",
            "--blame",
            "b",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("symlink"), "{r:?}");
    assert_eq!(
        f.healthy.tick_files().len(),
        1,
        "nothing written through the link"
    );
    f.still_serving("evctl decide through a symlinked .evolving");
}

// Not HTTP, or cut short -----------------------------------------------------------------------

#[test]
fn garbage_that_is_not_http_is_answered_or_dropped() {
    let f = Fixture::new();
    // Deterministic noise, NULs and high bytes included.
    let mut x: u32 = 0x9e37_79b9;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x & 0xff) as u8
        })
        .collect();
    let cases: [(&str, &[u8]); 4] = [
        ("noise", &noise),
        ("a bare newline storm", b"\r\n\r\n\r\n\r\n\r\n\r\n"),
        ("a wrong protocol", b"SSH-2.0-OpenSSH_9.6\r\n"),
        (
            "a bad request line",
            b"GET\0/ HTTP/9.9\r\nHost: \xff\r\n\r\n",
        ),
    ];
    for (name, bytes) in cases {
        let raw = exchange(&f.w.socket(), bytes, true);
        let text = String::from_utf8_lossy(&raw);
        assert!(
            raw.is_empty() || text.starts_with("HTTP/1.1 4"),
            "{name}: neither refused nor dropped: {text:?}"
        );
        f.still_serving(name);
    }
}

#[test]
fn clients_that_disconnect_mid_request_do_not_hurt_the_daemon() {
    let f = Fixture::new();
    let sock = f.w.socket();
    let body = call(
        "ev.decide",
        serde_json::json!([{"context": {"store": f.store(&f.scratch)}, "decision": "half sent",
            "blame": "b", "grounds": [{"kind": "chosen", "claim": "c"}]}]),
    );
    let full = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let header_end = full.find("\r\n\r\n").expect("header end") + 4;
    let cuts = [
        0,
        7,
        header_end - 3,
        header_end,
        header_end + body.len() / 2,
        full.len() - 1,
    ];
    for cut in cuts {
        let mut s = connect(&sock);
        s.write_all(&full.as_bytes()[..cut]).expect("write part");
        drop(s);
        f.still_serving(&format!(
            "a client gone after {cut} of {} bytes",
            full.len()
        ));
    }
    // Many at once, some mid-header, some mid-body.
    let streams: Vec<UnixStream> = (0..64)
        .map(|i| {
            let mut s = connect(&sock);
            let _ = s.write_all(&full.as_bytes()[..(i * 37) % full.len()]);
            s
        })
        .collect();
    drop(streams);
    f.still_serving("64 clients gone mid-request");
    assert!(
        f.scratch.tick_files().is_empty(),
        "no partial request was applied"
    );
    // The same request sent whole is a real write, so the check above meant something.
    let http = parse_http(&exchange(&sock, full.as_bytes(), false)).expect("HTTP answer");
    let v: serde_json::Value = serde_json::from_str(&http.body).expect("JSON body");
    assert_eq!(v["result"]["ground_count"], 1, "{v}");
    assert_eq!(f.scratch.tick_files().len(), 1);
    f.still_serving("the whole request");
}

// Damaged stores through evctl -----------------------------------------------------------------

/// Two decisions in the scratch store, through the daemon; returns (genesis, head).
fn two_ticks(f: &Fixture) -> (String, String) {
    let mut ids = Vec::new();
    for text in ["first call", "second call"] {
        let r =
            f.w.evctl(
                f.scratch.path(),
                &["decide", text, "--assume", "a", "--blame", "Tester"],
            )
            .ok();
        ids.push(r.stdout[9..21].to_string());
    }
    // The daemon has read the store (its cache is warm).
    let r = f.w.evctl(f.scratch.path(), &["list"]).ok();
    assert!(r.stdout.contains("first call") && r.stdout.contains("second call"));
    (ids[0].clone(), ids[1].clone())
}

#[test]
fn a_hand_edited_tick_fails_verify_with_the_hash_mismatch() {
    let f = Fixture::new();
    let (genesis, head) = two_ticks(&f);
    let path = f.scratch.ev_dir().join("ticks").join(&head);
    let text = std::fs::read_to_string(&path).expect("tick");
    assert!(text.contains("\"second call\""));
    std::fs::write(&path, text.replace("\"second call\"", "\"SECOND CALL\"")).expect("edit");
    let r = f.w.evctl(f.scratch.path(), &["verify"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with(&format!("✗ {head}: id != hash(payload)"))),
        "{r:?}"
    );
    assert!(!r.stdout.contains(&format!("{genesis}: id")), "{r:?}");
    assert_eq!(r.stderr, "1 violation(s)\n");
    f.still_serving("verify of a hand-edited tick");
}

fn truncate_head_tick(f: &Fixture) -> String {
    let (_, head) = two_ticks(f);
    let path = f.scratch.ev_dir().join("ticks").join(&head);
    let text = std::fs::read(&path).expect("tick");
    // In place (same inode, same directory), as a crash or a full disk leaves it.
    std::fs::write(&path, &text[..text.len() / 2]).expect("truncate");
    head
}

#[test]
fn a_truncated_tick_fails_verify_with_the_parse_error() {
    let f = Fixture::new();
    let head = truncate_head_tick(&f);
    let r = f.w.evctl(f.scratch.path(), &["verify"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .starts_with(&format!("error: reading store: {head}: EOF while parsing")),
        "{r:?}"
    );
    f.still_serving("verify of a truncated tick");
}

#[test]
fn a_truncated_tick_fails_list_with_the_parse_error() {
    let f = Fixture::new();
    let head = truncate_head_tick(&f);
    let want = format!("error: reading store: {head}: EOF while parsing");
    // In-process, as upstream reads it.
    let local =
        f.w.evctl_env(f.scratch.path(), &[("EVD_NO_DAEMON", "1")], &["list"]);
    assert_eq!(local.code, 1, "in-process: {local:?}");
    assert!(local.stderr.starts_with(&want), "in-process: {local:?}");
    // Through the daemon, which has served this store before: the same answer.
    let r = f.w.evctl(f.scratch.path(), &["list"]);
    assert_eq!(
        (r.code, r.stderr.as_str(), r.stdout.as_str()),
        (1, local.stderr.as_str(), ""),
        "the daemon must notice the in-place change: {r:?}"
    );
    f.still_serving("list of a truncated tick");
}

#[test]
fn an_old_tick_truncated_in_place_fails_list_with_the_parse_error() {
    // Ticks are usually days old when damage happens: age them (mtime one hour back), let the
    // daemon see them so, then truncate one in place.
    let f = Fixture::new();
    let (_, head) = two_ticks(&f);
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for name in f.scratch.tick_files() {
        std::fs::File::options()
            .write(true)
            .open(f.scratch.ev_dir().join("ticks").join(name))
            .expect("open tick")
            .set_modified(hour_ago)
            .expect("age the tick");
    }
    let r = f.w.evctl(f.scratch.path(), &["list"]).ok();
    assert!(r.stdout.contains("second call"), "{r:?}");
    let path = f.scratch.ev_dir().join("ticks").join(&head);
    let text = std::fs::read(&path).expect("tick");
    std::fs::write(&path, &text[..text.len() / 2]).expect("truncate in place");

    let local =
        f.w.evctl_env(f.scratch.path(), &[("EVD_NO_DAEMON", "1")], &["list"]);
    assert_eq!(local.code, 1, "in-process: {local:?}");
    assert!(
        local
            .stderr
            .starts_with(&format!("error: reading store: {head}: EOF while parsing")),
        "in-process: {local:?}"
    );
    let r = f.w.evctl(f.scratch.path(), &["list"]);
    assert_eq!(
        (r.code, r.stderr.as_str(), r.stdout.as_str()),
        (1, local.stderr.as_str(), ""),
        "the daemon must notice the in-place change: {r:?}"
    );
    f.still_serving("list of an old tick truncated in place");
}

#[test]
fn a_tick_replaced_by_a_truncated_copy_fails_list_with_the_parse_error() {
    // The same damage written as a new file renamed over the tick (new inode, and ticks/ changes).
    let f = Fixture::new();
    let (_, head) = two_ticks(&f);
    let path = f.scratch.ev_dir().join("ticks").join(&head);
    let text = std::fs::read(&path).expect("tick");
    let tmp = f.scratch.ev_dir().join("results").join("truncated");
    std::fs::write(&tmp, &text[..text.len() / 2]).expect("write the truncated copy");
    std::fs::rename(&tmp, &path).expect("rename over the tick");
    for verb in ["list", "verify"] {
        let r = f.w.evctl(f.scratch.path(), &[verb]);
        assert_eq!(r.code, 1, "{verb}: {r:?}");
        assert!(
            r.stderr
                .starts_with(&format!("error: reading store: {head}: EOF while parsing")),
            "{verb}: {r:?}"
        );
        f.still_serving(&format!("{verb} of a tick replaced by a truncated copy"));
    }
}

#[test]
fn a_symlink_in_ticks_is_refused_by_name() {
    let f = Fixture::new();
    two_ticks(&f);
    let target = f.w.home.path().join("outside");
    std::fs::write(&target, "{}").expect("outside file");
    std::os::unix::fs::symlink(&target, f.scratch.ev_dir().join("ticks/aaaaaaaaaaaa"))
        .expect("symlink in ticks/");
    for verb in ["list", "verify"] {
        let r = f.w.evctl(f.scratch.path(), &[verb]);
        assert_eq!(r.code, 1, "{verb}: {r:?}");
        assert!(
            r.stderr
                .starts_with("error: reading store: aaaaaaaaaaaa is a symlink"),
            "{verb}: {r:?}"
        );
        f.still_serving(&format!("{verb} with a symlink in ticks/"));
    }
}

#[test]
fn a_connection_from_another_uid_is_dropped_unserved() {
    // Switching uid needs root (CI runs as root); elsewhere this check cannot be made.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to connect as another uid");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    // Open the path up so only the daemon's peer-uid check stands between nobody and the API.
    let sock = f.w.socket();
    for (p, mode) in [
        (f.w.rt.path().to_path_buf(), 0o711),
        (f.w.rt_dir(), 0o711),
        (sock.clone(), 0o666),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let body = call(
        "ev.list",
        serde_json::json!([{"context": {"store": f.store(&f.healthy)}}]),
    );
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({sock:?})\n\
         b={body:?}.encode()\n\
         got=b''\n\
         try:\n  s.sendall(b'POST / HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n' % len(b) + b)\n\
         except OSError: print(0); sys.exit(0)\n\
         try:\n  while True:\n    c=s.recv(65536)\n    if not c: break\n    got+=c\nexcept OSError: pass\n\
         print(len(got))\n",
        sock = sock.display().to_string(),
    );
    // An interpreter the other uid may execute (not a per-user shim under /root).
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a system python3 (apt-get install python3)");
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            python,
            "-c",
            &script,
        ])
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "another uid connected but must get no answer at all"
    );
    let log = std::fs::read_to_string(f.w.rt_dir().join("evd.log")).unwrap_or_default();
    assert!(
        log.contains("rejected a connection from another user"),
        "{log}"
    );
    f.still_serving("a connection from another uid");
}

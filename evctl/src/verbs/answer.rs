//! The answer files evd leaves in our runtime directory's `answers/` (a large listing or the
//! plain check rows, which need not pass through the socket): open or read one, only if it is a
//! regular file there of the announced length.
//!
//! It must not trust any other path, nor ask evd anything.

use std::path::Path;

/// An answer file evd wrote for us, opened: only a regular file in our own runtime directory's
/// `answers/`, of the announced length. Once open, it reads whole even if evd lets it go.
pub(super) fn open_answer(rt_dir: &Path, file: &proto::rpc::AnswerRef) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = Path::new(&file.path);
    if path.parent()? != rt_dir.join("answers") {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    (m.is_file() && m.len() == file.len).then_some(f)
}

/// An answer file evd wrote for us: only one in our own runtime directory's `answers/`, read
/// whole, of the announced length.
pub(super) fn read_answer(rt_dir: &Path, file: &proto::rpc::AnswerRef) -> Option<String> {
    let path = Path::new(&file.path);
    if path.parent()? != rt_dir.join("answers") {
        return None;
    }
    let text = evd::api::shared::fsio::read_text(path).ok()?;
    (text.len() as u64 == file.len).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_answer_file_from_our_own_runtime_directory_is_read() {
        let rt = tempfile::tempdir().expect("tempdir");
        let answers = rt.path().join("answers");
        std::fs::create_dir(&answers).expect("mkdir");
        let file = answers.join("1-0.txt");
        std::fs::write(&file, "green\tx\n").expect("write");
        let at = |path: &Path, len: u64| proto::rpc::AnswerRef {
            path: path.display().to_string(),
            len,
        };
        assert_eq!(
            read_answer(rt.path(), &at(&file, 8)).as_deref(),
            Some("green\tx\n")
        );
        assert_eq!(
            read_answer(rt.path(), &at(&file, 9)),
            None,
            "torn or changed"
        );
        assert_eq!(
            read_answer(rt.path(), &at(&answers.join("gone.txt"), 0)),
            None
        );
        let elsewhere = rt.path().join("1-0.txt");
        std::fs::write(&elsewhere, "x").expect("write");
        assert_eq!(
            read_answer(rt.path(), &at(&elsewhere, 1)),
            None,
            "not in answers/"
        );
    }
}

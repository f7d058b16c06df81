//! `--config FILE`: memcached.conf's options read before the command line's, so shoald
//! starts from the `/etc/memcached.conf` an operator already has (the syntax and the
//! merging are [`shoal_net::options_file`]'s).

use super::Args;
use clap::{CommandFactory, FromArgMatches};
use shoal_net::options_file::{self, FileRules, OptionsFileError};
use std::ffi::OsString;

/// shoald's rules for an options file: `-d` is dropped, as Debian's wrapper drops it
/// (systemd runs the daemon in the foreground); `-o` keys from the file and the command
/// line add up, since each key is a setting of its own.
const RULES: FileRules<'static> = FileRules {
    config: "config",
    ignored: &["daemon"],
    cumulative: &["extended"],
};

/// Why the command line (with its options file) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// clap's own: a bad flag on the command line, or `--help`, which clap reports as an
    /// error to print.
    #[error(transparent)]
    CommandLine(#[from] clap::Error),
    /// The options file: unreadable, or a line shoald refuses (memcached's words).
    #[error(transparent)]
    File(#[from] OptionsFileError),
}

impl Args {
    /// Reads `argv` (the program name first) and, when it names one with `--config`, the
    /// options file, whose options come first so that the command line's win.
    pub fn from_command_line(argv: Vec<OsString>) -> Result<Args, ArgsError> {
        let args = Args::try_parse_from_argv(&argv)?;
        let Some(path) = args.config.clone() else {
            return Ok(args);
        };
        let lines = options_file::read(&path)?;
        let merged =
            options_file::command_line_with_file(&Args::command(), &argv, &lines, &path, RULES)?;
        Ok(Args::try_parse_from_argv(&merged)?)
    }

    fn try_parse_from_argv(argv: &[OsString]) -> Result<Args, clap::Error> {
        let mut matches = Args::command().try_get_matches_from(argv)?;
        Args::from_arg_matches_mut(&mut matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Debian's stock /etc/memcached.conf (memcached 1.6.18-1), verbatim.
    const DEBIAN_MEMCACHED_CONF: &str = include_str!("../../tests/data/debian-memcached.conf");

    fn conf(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    fn args(file: &tempfile::NamedTempFile, extra: &[&str]) -> Result<Args, ArgsError> {
        let mut argv: Vec<OsString> = vec!["shoald".into(), "--config".into()];
        argv.push(file.path().into());
        argv.extend(extra.iter().map(OsString::from));
        Args::from_command_line(argv)
    }

    #[test]
    fn debians_stock_file_is_read_as_its_wrapper_reads_it() {
        let f = conf(DEBIAN_MEMCACHED_CONF);
        let a = args(&f, &[]).unwrap();
        // -d is the wrapper's to drop: systemd keeps the daemon in the foreground.
        assert!(!a.daemon);
        assert_eq!((a.memory_limit, a.port, a.verbose), (64, Some(11211), 0));
        assert_eq!(a.user.as_deref(), Some("memcache"));
        assert_eq!(a.listen, ["127.0.0.1"]);
        assert_eq!(
            a.pidfile.as_deref(),
            Some(std::path::Path::new("/var/run/memcached/memcached.pid"))
        );
        let s = a.settings().unwrap();
        assert_eq!(s.memory_limit, 64 << 20);
    }

    #[test]
    fn the_command_line_wins_over_the_file() {
        let f = conf("-m 64\n-p 11211\n-vv\n-l 127.0.0.1\n-o idle_timeout=5\n-c 10\n");
        let a = args(
            &f,
            &["-m", "128", "-v", "-l", "::1", "-o", "no_lru_crawler"],
        )
        .unwrap();
        assert_eq!((a.memory_limit, a.port, a.verbose), (128, Some(11211), 1));
        assert_eq!(a.listen, ["::1"]);
        let s = a.settings().unwrap();
        assert_eq!((s.conn_limit, s.idle_timeout), (10, 5));
        assert!(!s.lru_crawler);
        // Without the command line's, the file's values.
        let a = args(&f, &[]).unwrap();
        assert_eq!((a.memory_limit, a.verbose), (64, 2));
    }

    #[test]
    fn quoting_comments_and_blank_lines() {
        let f = conf(
            "\n   \n# comment\n-P '/run/with space/shoald.pid'  # trailing comment\n\
             -D \\#\n  -m 32\n",
        );
        let a = args(&f, &[]).unwrap();
        assert_eq!(
            a.pidfile.as_deref(),
            Some(std::path::Path::new("/run/with space/shoald.pid"))
        );
        assert_eq!(a.prefix_delimiter.as_deref(), Some("#"));
        assert_eq!(a.memory_limit, 32);
    }

    #[test]
    fn unknown_options_are_refused_with_memcacheds_text() {
        let f = conf("-m 64\n-Q\n");
        let e = args(&f, &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("shoald: invalid option -- 'Q'\nIllegal argument \"?\"\n(in "),
            "{e}"
        );
        assert!(e.ends_with(" line 2)"), "{e}");
        let f = conf("--no-such-option\n");
        let e = args(&f, &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("shoald: unrecognized option '--no-such-option'\n"),
            "{e}"
        );
        // An -o key shoald does not know is refused when the settings are validated, as
        // on the command line, with memcached's text.
        let f = conf("-o no_such_key\n");
        let e = args(&f, &[]).unwrap().settings().unwrap_err();
        assert_eq!(e.to_string(), "Illegal suboption \"no_such_key\"");
        let f = conf("-m lots\n");
        let e = args(&f, &[]).unwrap_err().to_string();
        assert!(e.contains(" line 1: invalid value 'lots'"), "{e}");
    }

    #[test]
    fn without_config_the_command_line_alone() {
        let a = Args::from_command_line(vec!["shoald".into(), "-m".into(), "8".into()]).unwrap();
        assert_eq!((a.memory_limit, a.config), (8, None));
        let e = Args::from_command_line(vec!["shoald".into(), "--config".into()]).unwrap_err();
        assert!(matches!(e, ArgsError::CommandLine(_)));
        let e = Args::from_command_line(vec![
            "shoald".into(),
            "--config".into(),
            "/nonexistent/memcached.conf".into(),
        ])
        .unwrap_err();
        assert!(matches!(e, ArgsError::File(_)), "{e}");
    }
}

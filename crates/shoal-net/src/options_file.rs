//! Options files in memcached.conf's syntax: `--config FILE` for shoald and shoal-queued.
//!
//! Debian's memcached package keeps the daemon's command line in `/etc/memcached.conf`
//! and its systemd unit starts memcached through a wrapper that reads it. This module
//! reads such a file the way that wrapper does, so an operator can point a daemon at the
//! file they already have:
//! - `#` and the rest of the line is a comment, wherever it stands (inside quotes too,
//!   as the wrapper strips it before anything else); `\#` is a literal `#`;
//! - blank lines are skipped; each other line holds options and their values, usually one
//!   option (`-m 64`, `-o modern,idle_timeout=30`);
//! - words are split as the shell splits them (the wrapper hands the joined lines to
//!   `sh`): whitespace separates, `'...'` and `"..."` quote, a backslash escapes the next
//!   character (inside double quotes only `$`, `` ` ``, `"` and `\`). Variables and
//!   commands are not expanded: a `$` is a `$`;
//! - a `logfile PATH` line is ignored, as the wrapper ignores it: the daemons log to
//!   stderr, which systemd's journal captures;
//! - any other line that does not start with `-` is refused, as is an option the daemon
//!   does not know, in memcached's (getopt's) words.
//!
//! [`command_line_with_file`] puts the file's options in front of the command line's.
//! An option the command line gives replaces the file's (the file's line is dropped),
//! so explicit flags win, and a repeated flag (`-v`) or a list (`-l`) is not added to the
//! file's. Options a daemon declares cumulative (shoald's `-o`, whose keys are separate
//! settings) keep the file's values, with the command line's after them.

use clap::parser::ValueSource;
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// How a daemon's options behave in a file.
#[derive(Debug, Clone, Copy)]
pub struct FileRules<'a> {
    /// The id of the option that names the file itself (refused inside a file).
    pub config: &'a str,
    /// Options a file may hold that are dropped: shoald's `-d`, which Debian's wrapper
    /// drops too, since systemd runs the daemon in the foreground. Such an option must be
    /// on a line of its own.
    pub ignored: &'a [&'a str],
    /// Options whose values from the file and the command line add up instead of the
    /// command line's replacing the file's.
    pub cumulative: &'a [&'a str],
}

/// One line of an options file that holds options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionLine {
    /// The line's number, from 1.
    pub number: usize,
    /// The words, unquoted.
    pub words: Vec<String>,
}

/// Why an options file could not be used. The texts for an unknown option or a missing
/// value are memcached's (getopt's line, then memcached's), followed by where.
#[derive(Debug, thiserror::Error)]
pub enum OptionsFileError {
    /// The file could not be read.
    #[error("cannot read options file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A quote opened on a line is not closed on it.
    #[error("{path} line {line}: unterminated {quote} quote")]
    Unterminated {
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
        /// `single` or `double`.
        quote: &'static str,
    },
    /// A line that is neither options nor `logfile PATH`.
    #[error("{path} line {line}: {text:?} is not an option (options start with -)")]
    NotAnOption {
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A short option the daemon does not know.
    #[error(
        "{program}: invalid option -- '{option}'\nIllegal argument \"?\"\n(in {path} line {line})"
    )]
    UnknownShort {
        /// The daemon's name.
        program: String,
        /// The option's letter.
        option: char,
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
    },
    /// A long option the daemon does not know.
    #[error("{program}: unrecognized option '{option}'\nIllegal argument \"?\"\n(in {path} line {line})")]
    UnknownLong {
        /// The daemon's name.
        program: String,
        /// The option, `--name`.
        option: String,
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
    },
    /// An option that takes a value is last on its line.
    #[error("{program}: option requires an argument -- '{option}'\nIllegal argument \"?\"\n(in {path} line {line})")]
    MissingValue {
        /// The daemon's name.
        program: String,
        /// The option as written, without its dashes.
        option: String,
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
    },
    /// Any other value the daemon refuses (a number that is not one, ...).
    #[error("{path} line {line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
        /// The daemon's own message.
        message: String,
    },
    /// An ignored option shares its line with others, which would then take effect.
    #[error("{path} line {line}: {option} is ignored in an options file and must be on a line of its own")]
    IgnoredNotAlone {
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
        /// The ignored option, as written (`-d`).
        option: String,
    },
    /// The file names another options file.
    #[error("{path} line {line}: an options file cannot name another one")]
    Nested {
        /// The file.
        path: PathBuf,
        /// The line's number.
        line: usize,
    },
}

/// Reads an options file into its option lines (comments, blank lines and `logfile`
/// lines left out).
pub fn read(path: &Path) -> Result<Vec<OptionLine>, OptionsFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| OptionsFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// [`read`] for text already in memory; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<OptionLine>, OptionsFileError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let words =
            split_words(strip_comment(raw)).map_err(|quote| OptionsFileError::Unterminated {
                path: path.to_path_buf(),
                line: number,
                quote,
            })?;
        let Some(first) = words.first() else {
            continue;
        };
        if !first.starts_with('-') {
            if first == "logfile" {
                continue;
            }
            return Err(OptionsFileError::NotAnOption {
                path: path.to_path_buf(),
                line: number,
                text: raw.trim().to_string(),
            });
        }
        lines.push(OptionLine { number, words });
    }
    Ok(lines)
}

/// The line up to its first `#` that no backslash escapes (the wrapper's
/// `s/(?<!\\)\#[^\#]*//g`, which leaves nothing after the first such `#`).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| bytes[i] == b'#' && (i == 0 || bytes[i - 1] != b'\\'))
        .unwrap_or(bytes.len());
    &line[..end]
}

/// Splits a line into words as `sh` does, without expansions. `Err` names the quote left
/// open.
fn split_words(line: &str) -> Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut word = String::new();
    // A word exists once any of its characters (or an empty quote) is seen.
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                // A trailing backslash is a line continuation in sh; here, nothing.
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("single"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('$' | '`' | '"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("double"),
                        },
                        Some(c) => word.push(c),
                        None => return Err("double"),
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The ids of `cmd`'s options that `matches` got from the words parsed (not defaults).
fn given_ids(cmd: &clap::Command, matches: &clap::ArgMatches) -> HashSet<String> {
    cmd.get_arguments()
        .map(|a| a.get_id().as_str())
        .filter(|id| matches!(matches.value_source(id), Some(ValueSource::CommandLine)))
        .map(str::to_string)
        .collect()
}

/// `argv` (program name first) with the options of `lines` (read from `path`) put after
/// the program name, except those the command line gives itself (see the module's
/// documentation). Each line is checked against `cmd`, so an unknown option or a bad
/// value is reported with its line.
pub fn command_line_with_file(
    cmd: &clap::Command,
    argv: &[OsString],
    lines: &[OptionLine],
    path: &Path,
    rules: FileRules<'_>,
) -> Result<Vec<OsString>, OptionsFileError> {
    let program = argv
        .first()
        .cloned()
        .unwrap_or_else(|| OsString::from(cmd.get_name()));
    let name = cmd.get_name().to_string();
    let on_command_line = cmd
        .clone()
        .try_get_matches_from(argv)
        .map(|m| given_ids(cmd, &m))
        .unwrap_or_default();
    let mut merged = vec![program.clone()];
    for line in lines {
        let words = std::iter::once(program.clone()).chain(line.words.iter().map(OsString::from));
        let matches = match cmd.clone().try_get_matches_from(words) {
            Ok(m) => m,
            // `-h` in a file: skipped, as the wrapper skips it.
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => continue,
            Err(e) => return Err(line_error(&e, &name, line, path)),
        };
        let ids = given_ids(cmd, &matches);
        if ids.contains(rules.config) {
            return Err(OptionsFileError::Nested {
                path: path.to_path_buf(),
                line: line.number,
            });
        }
        if let Some(ignored) = rules.ignored.iter().find(|i| ids.contains(**i)) {
            if ids.len() > 1 {
                return Err(OptionsFileError::IgnoredNotAlone {
                    path: path.to_path_buf(),
                    line: line.number,
                    option: flag_name(cmd, ignored),
                });
            }
            continue;
        }
        let replaced = ids
            .iter()
            .all(|id| on_command_line.contains(id) && !rules.cumulative.contains(&id.as_str()));
        if !ids.is_empty() && replaced {
            continue;
        }
        merged.extend(line.words.iter().map(OsString::from));
    }
    merged.extend(argv.iter().skip(1).cloned());
    Ok(merged)
}

/// How an option is written: `-d`, or `--name` when it has no short form.
fn flag_name(cmd: &clap::Command, id: &str) -> String {
    let arg = cmd.get_arguments().find(|a| a.get_id().as_str() == id);
    match (
        arg.and_then(|a| a.get_short()),
        arg.and_then(|a| a.get_long()),
    ) {
        (Some(c), _) => format!("-{c}"),
        (None, Some(long)) => format!("--{long}"),
        (None, None) => id.to_string(),
    }
}

/// An error clap reported for one line, in memcached's words where memcached has them.
fn line_error(e: &clap::Error, program: &str, line: &OptionLine, path: &Path) -> OptionsFileError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let path = path.to_path_buf();
    let number = line.number;
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => s.clone(),
                _ => String::new(),
            };
            if let Some(long) = arg.strip_prefix("--") {
                let option = format!("--{}", long.split('=').next().unwrap_or(long));
                return OptionsFileError::UnknownLong {
                    program: program.to_string(),
                    option,
                    path,
                    line: number,
                };
            }
            if let Some(c) = arg.strip_prefix('-').and_then(|s| s.chars().next()) {
                return OptionsFileError::UnknownShort {
                    program: program.to_string(),
                    option: c,
                    path,
                    line: number,
                };
            }
        }
        ErrorKind::InvalidValue | ErrorKind::NoEquals
            if line.words.last().is_some_and(|w| w.starts_with('-')) =>
        {
            // The option whose value is missing: the line's last word.
            let last = line.words.last().map(String::as_str).unwrap_or_default();
            let option = match last.strip_prefix("--") {
                Some(long) => long.to_string(),
                None => last.chars().last().map(String::from).unwrap_or_default(),
            };
            return OptionsFileError::MissingValue {
                program: program.to_string(),
                option,
                path,
                line: number,
            };
        }
        _ => {}
    }
    let message = e.render().to_string();
    let message = message.lines().next().unwrap_or_default();
    OptionsFileError::Invalid {
        path,
        line: number,
        message: message
            .strip_prefix("error: ")
            .unwrap_or(message)
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn words(line: &str) -> Vec<String> {
        split_words(strip_comment(line)).expect("splits")
    }

    #[test]
    fn comments_are_cut_where_the_wrapper_cuts_them() {
        assert_eq!(words("-m 64 # cap"), ["-m", "64"]);
        assert_eq!(words("# -m 64"), Vec::<String>::new());
        assert_eq!(words("   # indented comment"), Vec::<String>::new());
        // Inside quotes too: the wrapper strips before the shell sees the line.
        assert_eq!(split_words(strip_comment("-o \"a#b\"")), Err("double"));
        // An escaped hash is a hash.
        assert_eq!(words(r"-D \#"), ["-D", "#"]);
    }

    #[test]
    fn words_split_and_unquote_as_sh_does() {
        assert_eq!(words("  -l   127.0.0.1  "), ["-l", "127.0.0.1"]);
        assert_eq!(words("-m\t64"), ["-m", "64"]);
        assert_eq!(words("-P '/run/a b/x.pid'"), ["-P", "/run/a b/x.pid"]);
        assert_eq!(words(r#"-P "/run/a b/x.pid""#), ["-P", "/run/a b/x.pid"]);
        assert_eq!(words(r"-P /run/a\ b/x.pid"), ["-P", "/run/a b/x.pid"]);
        assert_eq!(words(r#"-o "x=\"y\"" "#), ["-o", r#"x="y""#]);
        assert_eq!(words(r#"-o "a\nb""#), ["-o", r"a\nb"]);
        assert_eq!(words(r#"-D '' -v"#), ["-D", "", "-v"]);
        assert_eq!(words("-o pre'fix'ed"), ["-o", "prefixed"]);
        assert_eq!(words("-P $HOME"), ["-P", "$HOME"]);
        assert_eq!(split_words("-P 'open"), Err("single"));
    }

    #[test]
    fn blank_comment_and_logfile_lines_are_skipped() {
        let text = "\n# memcached default config file\n-d\n\nlogfile /var/log/memcached.log\n\
                    -m 64\n   \n-p 11211 # port\n";
        let lines = parse(text, Path::new("m.conf")).unwrap();
        let got: Vec<_> = lines
            .iter()
            .map(|l| (l.number, l.words.join(" ")))
            .collect();
        assert_eq!(
            got,
            [
                (3, "-d".into()),
                (6, "-m 64".into()),
                (8, "-p 11211".into())
            ]
        );
        let err = parse("-m 64\nmemory 64\n", Path::new("m.conf")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.conf line 2: \"memory 64\" is not an option (options start with -)"
        );
        let err = parse("-P \"/run/x\n", Path::new("m.conf")).unwrap_err();
        assert_eq!(err.to_string(), "m.conf line 1: unterminated double quote");
    }

    /// A memcached-like command line: scalars, a count, a list, a cumulative list.
    fn command() -> Command {
        Command::new("memd")
            .args_override_self(true)
            .arg(
                Arg::new("port")
                    .short('p')
                    .long("port")
                    .default_value("11211"),
            )
            .arg(
                Arg::new("memory")
                    .short('m')
                    .long("memory-limit")
                    .default_value("64"),
            )
            .arg(Arg::new("verbose").short('v').action(ArgAction::Count))
            .arg(Arg::new("listen").short('l').action(ArgAction::Append))
            .arg(Arg::new("extended").short('o').action(ArgAction::Append))
            .arg(Arg::new("daemon").short('d').action(ArgAction::SetTrue))
            .arg(Arg::new("config").long("config"))
    }

    const RULES: FileRules<'static> = FileRules {
        config: "config",
        ignored: &["daemon"],
        cumulative: &["extended"],
    };

    fn merged(file: &str, argv: &[&str]) -> Result<Vec<String>, OptionsFileError> {
        let path = Path::new("m.conf");
        let lines = parse(file, path)?;
        let argv: Vec<OsString> = std::iter::once("memd")
            .chain(argv.iter().copied())
            .map(OsString::from)
            .collect();
        let out = command_line_with_file(&command(), &argv, &lines, path, RULES)?;
        Ok(out
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect())
    }

    #[test]
    fn the_file_goes_first_and_the_command_line_wins() {
        let file = "-d\n-m 64\n-p 11211\n-v\n-l 127.0.0.1\n-o a=1\n";
        assert_eq!(
            merged(file, &[]).unwrap(),
            [
                "memd",
                "-m",
                "64",
                "-p",
                "11211",
                "-v",
                "-l",
                "127.0.0.1",
                "-o",
                "a=1"
            ]
        );
        // -m, -v and -l on the command line drop the file's lines; -o adds up; -d is
        // dropped from the file whatever the command line says.
        assert_eq!(
            merged(
                file,
                &["--memory-limit=128", "-vv", "-l", "::1", "-o", "b=2"]
            )
            .unwrap(),
            [
                "memd",
                "-p",
                "11211",
                "-o",
                "a=1",
                "--memory-limit=128",
                "-vv",
                "-l",
                "::1",
                "-o",
                "b=2"
            ]
        );
        let m = command()
            .try_get_matches_from(merged(file, &["-m", "128", "-l", "::1"]).unwrap())
            .unwrap();
        assert_eq!(m.get_one::<String>("memory").unwrap(), "128");
        assert_eq!(m.get_one::<String>("port").unwrap(), "11211");
        let listen: Vec<_> = m.get_many::<String>("listen").unwrap().collect();
        assert_eq!(listen, ["::1"]);
        assert_eq!(m.get_count("verbose"), 1);
    }

    #[test]
    fn a_line_with_several_options_stays_unless_all_are_replaced() {
        assert_eq!(
            merged("-m 64 -p 1\n", &["-m", "32"]).unwrap(),
            ["memd", "-m", "64", "-p", "1", "-m", "32"]
        );
        assert_eq!(
            merged("-m 64 -p 1\n", &["-m", "32", "-p", "2"]).unwrap(),
            ["memd", "-m", "32", "-p", "2"]
        );
    }

    #[test]
    fn unknown_options_are_refused_in_memcacheds_words() {
        let e = merged("-m 64\n-Q\n", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "memd: invalid option -- 'Q'\nIllegal argument \"?\"\n(in m.conf line 2)"
        );
        let e = merged("--bogus=1\n", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "memd: unrecognized option '--bogus'\nIllegal argument \"?\"\n(in m.conf line 1)"
        );
        let e = merged("-v\n-m\n", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "memd: option requires an argument -- 'm'\nIllegal argument \"?\"\n(in m.conf line 2)"
        );
    }

    #[test]
    fn refuses_nesting_and_an_ignored_option_sharing_a_line() {
        let e = merged("--config other.conf\n", &[]).unwrap_err();
        assert!(matches!(e, OptionsFileError::Nested { line: 1, .. }), "{e}");
        let e = merged("-d -m 64\n", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.conf line 1: -d is ignored in an options file and must be on a line of its own"
        );
    }

    #[test]
    fn a_missing_file_says_which() {
        let e = read(Path::new("/nonexistent/shoal.conf")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read options file /nonexistent/shoal.conf: "),
            "{e}"
        );
    }
}

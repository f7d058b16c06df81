//! Every installed binary's clap command, from the definitions its `--help` prints.
//!
//! shoald and shoal-queued define theirs in their libraries. shoal-proxy, shoal and
//! shoal-bench define theirs in their binaries' sources, which are compiled here as
//! modules (their `Cli`/`Args` types are `pub(crate)` for this); nothing is copied, so a
//! flag added to a binary shows in its man page with the next build. A binary module
//! that reaches a sibling as `crate::name` needs that sibling declared at this crate's
//! root too (shoal-bench's `util`, in main.rs).

use clap::CommandFactory;

/// shoal-proxy's `main.rs`.
#[allow(dead_code)]
#[path = "../../shoal-proxy/src/main.rs"]
mod proxy;

/// shoal's `main.rs`.
#[allow(dead_code)]
#[path = "../../shoal-cli/src/main.rs"]
mod cli;

/// shoal-bench's `main.rs` and its subcommand modules.
#[allow(dead_code)]
#[path = "../../shoal-bench/src/bin/shoal-bench/main.rs"]
mod bench;

/// What each page says beyond the options: its one-line summary for the NAME section,
/// and extra roff sections.
pub struct Binary {
    /// The clap command, named as the installed binary.
    pub command: clap::Command,
    /// Sections appended to the generated page (roff).
    pub extra: &'static str,
}

/// The installed binaries' commands, in the order the package lists them.
pub fn all() -> Vec<Binary> {
    vec![
        Binary {
            command: shoal_server::Args::command(),
            extra: SHOALD,
        },
        Binary {
            command: proxy::Args::command(),
            extra: PROXY,
        },
        Binary {
            command: shoal_queued::Args::command(),
            extra: QUEUED,
        },
        Binary {
            command: cli::Cli::command(),
            extra: SEE_ALSO,
        },
        Binary {
            command: bench::Cli::command(),
            extra: SEE_ALSO,
        },
    ]
}

const SHOALD: &str = r#".SH CONFIGURATION FILE
With \fB\-\-config\fR \fIFILE\fR, shoald reads its options from \fIFILE\fR before the
command line, in the syntax of Debian's \fI/etc/memcached.conf\fR: one option per line
(as on memcached's command line), \fB#\fR to the end of the line a comment (\fB\e#\fR is
a literal \fB#\fR), blank lines skipped, words split and quoted as the shell does.
A \fB\-d\fR line and a \fBlogfile\fR line are ignored, as Debian's
systemd\-memcached\-wrapper ignores them: under systemd the daemon stays in the
foreground and its log goes to the journal. An unknown option is refused with
memcached's message and the line it is on.
.PP
An option given on the command line replaces the file's: \fBshoald \-\-config
/etc/memcached.conf \-m 1024\fR serves 1024 MB whatever the file says. \fB\-o\fR keys from
the file and the command line add up.
.SH SIGNALS
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
Stop accepting, finish the replies in flight, exit.
.TP
\fBSIGUSR1\fR
memcached's graceful stop: as SIGTERM, and with \fB\-e\fR the memory file's metadata is
saved so that the next start with the same settings finds the cache (warm restart).
The packaged unit stops shoald with SIGUSR1.
.SH LOGGING
Log lines go to stderr. Under systemd (stderr is the journal's stream, as
\fBJOURNAL_STREAM\fR says) they follow the journal's conventions: a \fB<N>\fR syslog
priority in front, no timestamp; \fB\-\-log\-format json\fR writes one JSON object per
line instead.
.SH FILES
.TP
.I /etc/shoal/shoald.conf
The options the packaged shoald.service starts shoald with (memcached.conf syntax).
.TP
.I /etc/memcached.conf
memcached's own file, which \fB\-\-config\fR reads unchanged.
.TP
.I /usr/lib/systemd/system/shoald.service
The systemd unit.
.SH SEE ALSO
.BR memcached (1),
.BR shoal\-proxy (1),
.BR shoal\-queued (1),
.BR shoal (1),
.BR systemd.exec (5)
"#;

const PROXY: &str = r#".SH SIGNALS
.TP
\fBSIGHUP\fR
Reload the configuration file (\fBsystemctl reload shoal\-proxy\fR).
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
Stop accepting, finish the replies in flight, exit.
.SH FILES
.TP
.I /etc/shoal/nutcracker.yml
The configuration the packaged shoal\-proxy.service reads (twemproxy's YAML).
.TP
.I /usr/lib/systemd/system/shoal\-proxy.service
The systemd unit.
.SH SEE ALSO
.BR nutcracker (8),
.BR shoald (1)
"#;

const QUEUED: &str = r#".SH CONFIGURATION FILE
With \fB\-\-config\fR \fIFILE\fR, shoal\-queued reads its options from \fIFILE\fR before
the command line, in memcached.conf's syntax: one option per line, \fB#\fR comments,
shell quoting. Options given on the command line win over the file's.
.SH SIGNALS
.TP
\fBSIGHUP\fR
Re-reads the queue config file (\fB\-\-queue\-config\fR) and applies it to every existing
queue, as the \fBreload\fR command does; a file that does not parse changes nothing.
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
Stop accepting, send the replies in flight, fsync every queue and exit 0.
.SH FILES
.TP
.I /etc/shoal/queued.conf
The options the packaged shoal\-queued.service starts shoal\-queued with.
.TP
.I /var/lib/shoal/queued
The packaged unit's data directory.
.TP
.I /usr/lib/systemd/system/shoal\-queued.service
The systemd unit.
.SH SEE ALSO
.BR shoald (1),
.BR shoal\-proxy (1)
"#;

const SEE_ALSO: &str = r#".SH SEE ALSO
.BR shoald (1),
.BR shoal\-proxy (1),
.BR shoal\-queued (1)
"#;

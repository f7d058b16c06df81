//! Writing experiments up: `results.md` (tables beside the seeds' published numbers, the
//! machine described), `results.json` and the PNG charts, in one directory.

use crate::machine::MachineInfo;
use crate::BenchError;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// What every experiment's results can do.
pub trait Experiment {
    /// A section heading.
    fn title(&self) -> &'static str;
    /// The section body: tables and notes.
    fn markdown(&self) -> String;
    /// Draws its charts into `dir`; returns their file names.
    fn charts(&self, dir: &Path) -> Result<Vec<String>, BenchError>;
    /// What could not run, and why (missing servers and their packages).
    fn skipped(&self) -> &[String];
}

/// One experiment's results, ready to write.
pub struct Section {
    /// Its JSON key (`hash`, `cas`, ...).
    pub key: &'static str,
    /// The results as JSON.
    pub json: serde_json::Value,
    /// The results.
    pub body: Box<dyn Experiment>,
}

impl Section {
    /// Wraps an experiment's results.
    pub fn new<E: Experiment + Serialize + 'static>(
        key: &'static str,
        e: E,
    ) -> Result<Self, BenchError> {
        let json = serde_json::to_value(&e)
            .map_err(|err| BenchError::Config(format!("serialising {key}: {err}")))?;
        Ok(Section {
            key,
            json,
            body: Box::new(e),
        })
    }
}

/// Everything written by one command.
#[derive(Serialize)]
struct ResultsJson<'a> {
    command: &'a str,
    mode: &'a str,
    machine: &'a MachineInfo,
    experiments: serde_json::Map<String, serde_json::Value>,
}

/// The markdown of every section (charts linked when `with_charts`).
pub fn markdown(
    command: &str,
    machine: &MachineInfo,
    sections: &[Section],
    charts: &[Vec<String>],
) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# shoal-bench: the field reports, reproduced\n");
    let _ = writeln!(m, "Command: `{command}`  ");
    let _ = writeln!(m, "Machine: {}  ", machine.line());
    let _ = writeln!(
        m,
        "Client and servers share this machine over loopback; the seeds ran client and servers on separate, much older machines over a LAN, so their numbers are context, not targets.\n"
    );
    for (i, s) in sections.iter().enumerate() {
        let _ = writeln!(m, "## {}\n", s.body.title());
        m.push_str(&s.body.markdown());
        for why in s.body.skipped() {
            let _ = writeln!(m, "\n**Skipped:** {why}");
        }
        if let Some(files) = charts.get(i) {
            m.push('\n');
            for f in files {
                let _ = writeln!(m, "![{f}]({f})");
            }
        }
        m.push('\n');
    }
    m
}

/// Writes `results.md`, `results.json` and the charts into `dir`.
pub fn write(
    dir: &Path,
    command: &str,
    mode: &str,
    machine: &MachineInfo,
    sections: &[Section],
) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir.display().to_string(), e))?;
    let mut charts = Vec::new();
    for s in sections {
        charts.push(s.body.charts(dir)?);
    }
    let md = markdown(command, machine, sections, &charts);
    let path = dir.join("results.md");
    std::fs::write(&path, md).map_err(|e| BenchError::io(path.display().to_string(), e))?;
    let json = ResultsJson {
        command,
        mode,
        machine,
        experiments: sections
            .iter()
            .map(|s| (s.key.to_string(), s.json.clone()))
            .collect(),
    };
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| BenchError::Config(format!("serialising results: {e}")))?;
    let path = dir.join("results.json");
    std::fs::write(&path, text).map_err(|e| BenchError::io(path.display().to_string(), e))?;
    Ok(())
}

/// A compact number for tables: `12345` -> `12,345`, fractions to one decimal.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v.abs() >= 100.0 {
        let s = format!("{:.0}", v);
        let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{sign}{out}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(1234567.4), "1,234,567");
        assert_eq!(num(123.0), "123");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(0.123), "0.12");
        assert_eq!(num(-4321.0), "-4,321");
        assert_eq!(num(f64::NAN), "-");
    }
}

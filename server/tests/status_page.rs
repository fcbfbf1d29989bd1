//! The status page at `/` in a real browser: headless Chromium loads it from a server fed by `hlsim`, and the DOM
//! it dumps shows the state, the height and every fed stage's percentiles as numbers (the page fetched `/status`
//! and rendered it); a screenshot of it is written and is a real image.
//!
//! Needs `chromium` on PATH (Debian: chromium, installed by `make setup`); without it the test prints why and
//! passes without checking anything.

mod livefeed;
mod procs;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use livefeed::LiveRig;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("chromium")).find(|p| p.is_file())
}

/// Runs headless Chromium on `url` with `extra` flags (bounded); returns its stdout.
fn run_chromium(bin: &Path, profile: &Path, url: &str, extra: &[String]) -> String {
    let log = profile.with_extension("log");
    let mut child = Command::new(bin)
        .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--no-default-browser-check", "--disable-background-networking", "--disable-component-update"])
        .args(["--disable-sync", "--disable-extensions", "--hide-scrollbars"])
        // Timers run on a virtual clock: 8 s of the page's polling, then the dump, without waiting 8 s.
        .arg("--virtual-time-budget=8000")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "chromium failed ({status}); log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    reader.join().unwrap()
}

/// The text of the element with `id` (first tag with that id, up to its closing tag).
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in the DOM:\n{dom}"));
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find('<').unwrap();
    &dom[start..end]
}

/// The cells of the stage table's row for `stage`.
/// The cells of a stage's row for the diffs line (the page has one row per stage and line).
fn stage_row<'a>(dom: &'a str, stage: &str) -> Vec<&'a str> {
    let tag = format!("<tr data-stage=\"{stage}\" data-line=\"diffs\">");
    let at = dom.find(&tag).unwrap_or_else(|| panic!("no row for {stage}:\n{dom}"));
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    row.split("<td>").skip(1).map(|c| c.split("</td>").next().unwrap()).collect()
}

#[test]
fn the_status_page_shows_live_numbers_in_chromium() {
    let Some(bin) = chromium() else {
        procs::skip("chromium not on PATH (Debian: apt-get install chromium; `make setup` does)");
        return;
    };
    let feed = LiveRig::start("");
    // The page itself: one self-contained document.
    let page = reqwest::blocking::get(format!("{}/", feed.admin)).unwrap();
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let html = page.text().unwrap();
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "the page loads nothing from elsewhere");
    // Wait until the one-minute window has settled blocks, so the table has numbers to show.
    let deadline = Instant::now() + Duration::from_secs(30);
    while procs::get_json(&format!("{}/status", feed.admin)).is_none_or(|s| s["blocks"].as_u64().unwrap_or(0) < 5) {
        assert!(Instant::now() < deadline, "no settled blocks in /status within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }

    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/", feed.admin);
    let dom = run_chromium(&bin, &tmp.path().join("p1"), &url, &["--dump-dom".into()]);
    assert_eq!(text_of(&dom, "state"), "live", "state");
    let height: u64 = text_of(&dom, "height").parse().unwrap_or_else(|_| panic!("height is not a number:\n{dom}"));
    assert!(height > 1_000_000_000, "{height}");
    assert!(text_of(&dom, "error").is_empty(), "the page reports an error: {}", text_of(&dom, "error"));
    // Nobody is connected, so the write stages have no blocks; the others have numbers.
    for stage in ["block_to_node_write", "node_write_to_read", "read_to_applied", "applied_to_published"] {
        let cells = stage_row(&dom, stage);
        assert_eq!(cells.len(), 8, "{stage}: {cells:?}");
        assert_eq!((cells[0], cells[1]), (stage, "diffs"));
        let blocks: u64 = cells[2].parse().unwrap_or_else(|_| panic!("{stage}: block count {:?}", cells[2]));
        assert!(blocks > 0, "{stage}: no blocks");
        for c in &cells[3..] {
            let v: f64 = c.parse().unwrap_or_else(|_| panic!("{stage}: {c:?} is not a number"));
            assert!(v >= 0.0, "{stage}: {v}");
        }
    }
    // Units, not speed: the exchange-to-node stage is never less than the simulator's node lag (150 ms by
    // default; it stamps a block that long before writing it), so in ms the page shows at least that (less the
    // display's rounding), where seconds would show 0.15 and µs a thousand times more.
    let lag = 150.0;
    let p50: f64 = stage_row(&dom, "block_to_node_write")[3].parse().unwrap();
    assert!(p50 >= lag - 0.5 && p50 < lag * 1000.0, "block_to_node_write p50 {p50}: not in ms");
    assert!(dom.contains("<canvas id=\"chart-stages\""), "the chart is there");
    // The one source, named and reading, in the Sources table (the race table is hidden with one source).
    let at = dom.find("id=\"sources\"").expect("the sources table");
    let table = &dom[at..at + dom[at..].find("</table>").unwrap()];
    assert!(table.contains("<td>file:") && table.contains("<td>reading</td>"), "{table}");

    let shot = tmp.path().join("status.png");
    run_chromium(
        &bin,
        &tmp.path().join("p2"),
        &url,
        &[format!("--screenshot={}", shot.display()), "--window-size=1200,900".into()],
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert!(png.len() > 20_000, "the screenshot is {} bytes: blank?", png.len());
    if let Some(keep) = std::env::var_os("HLBOOK_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

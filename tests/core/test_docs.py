"""The user guide reads as a library's documentation, not a lab notebook.

README.md and every page under docs/ are written in the present tense: no run history
(issue numbers, dates, "Run history" sections, sentences that narrate what the code used
to do), and every relative link points at a file that exists. Measurements live in
benchmarks/ (each folder's README gives its latest figure with command, machine and
commit; benchmarks/RESULTS.md sums them up); history lives in git.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BENCHMARK_READMES = sorted((ROOT / "benchmarks").rglob("README.md"))

MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
          "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
#: (what, pattern): run history a user guide does not carry
HISTORY = [
    ("an issue number", re.compile(r"\bissues?\s+#?\d+\b|\bPR\s*#?\d+\b", re.I)),
    ("an issue reference", re.compile(r"(?<![\w&/#])#\d+\b")),
    ("a date", re.compile(r"\b20\d\d-\d\d-\d\d\b")),
    ("a month and year", re.compile(rf"\b(?:{MONTHS})\.?\s+(?:\d{{1,2}},?\s+)?20\d\d\b")),
    ("a run-history section", re.compile(r"run history", re.I)),
    ("a session", re.compile(r"\b(?:this|that|the (?:first|second|third|next|previous|last)|"
                             r"an? (?:earlier|later)) session\b", re.I)),
    ("history narrated", re.compile(
        r"\bused to (?:need|take|be|run|live|read|give|have|write|feed|cost)\b|"
        r"\bnow (?:has|is|are|(?:decode|run|read|write|take|give|train|use|default|keep|set|"
        r"compute|accumulate|count|fall|stream|start)s?)\b|"
        r"\b(?:since|before|after) (?:the|this) (?:redesign|change|commit|fix|branch)\b|"
        r"\b(?:since|before|until) (?:commit |issue )?`?[0-9a-f]{7,40}`?\b|"
        r"\bthe old (?:behaviour|path|default|recipe|preset)\b|\bas before\b|\btoday\b",
        re.I)),
]
#: [text](target): a relative link (not a URL, not a bare #anchor, not mailto:)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def blank(match):
    """A matched block as that many empty lines (line numbers stay those of the file)."""
    return "\n" * match.group(0).count("\n")


def prose(path):
    """The page's text outside fenced code blocks and inline code (commands, paths and
    identifiers may legitimately contain digits, hashes and words like `now`), and outside
    the replication table generated from the packaged CSVs (its rows' texts are data, checked
    against them by tests/core/test_baselines.py)."""
    from taylorformer_replication.replication import TABLE_BEGIN, TABLE_END

    text = FENCE.sub(blank, path.read_text(encoding="utf-8"))
    text = re.sub(re.escape(TABLE_BEGIN) + ".*?" + re.escape(TABLE_END), blank, text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def history_in(text):
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in HISTORY:
            match = pattern.search(line)
            if match:
                found.append(f"{number}: {what}: {match.group(0)!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_run_history_in_the_guide(page):
    found = history_in(prose(page))
    assert not found, f"{page.relative_to(ROOT)} narrates history (it belongs to git):\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES + BENCHMARK_READMES + [ROOT / "benchmarks" / "RESULTS.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    if not page.exists():
        pytest.fail(f"{page.relative_to(ROOT)} is missing")
    missing = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)}: links to missing files: {missing}"


def test_the_checks_catch_history():
    """The patterns are not vacuous: each kind of history is caught, and plain present-tense
    prose (with numbers, versions and hex colours) is not."""
    caught = ["Fixed in issue 38.", "See #12 for the discussion.", "Measured on 2026-11-25.",
              "Run on November 2026.", "## Run history", "The sampler used to need 18 GB.",
              "The sampler now decodes in chunks.", "Re-measured in this session.",
              "Since commit 1a2b3c4 it runs in chunks."]
    for text in caught:
        assert history_in(text), text
    clean = ["TensorFlow 2.21 and Keras 3.15 on 2 cores.", "A grid of 1000 x 1000 cells.",
             "Colour #ff0000 is not an issue.", "The rows of Table 5 in 2 steps.",
             "Known limitations are listed below.", "The mean is now-casted.",
             "A lock whose process no longer exists is removed."]
    for text in clean:
        assert not history_in(text), (text, history_in(text))


def test_the_readme_is_short_and_starts_users_off():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 120
    for command in ("bash scripts/quickstart.sh", "bash scripts/test.sh", "pip install"):
        assert command in text, command
    assert re.search(r"!\[[^\]]*\]\(docs/figures/[\w.-]+\.png\)", text), "one picture from docs/figures"


@pytest.mark.parametrize("readme", BENCHMARK_READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_benchmark_readme_gives_command_machine_and_commit(readme):
    """Each benchmarks README carries its latest figure with what produced it."""
    text = readme.read_text(encoding="utf-8")
    for word in ("command", "machine", "commit"):
        assert re.search(word, text, re.I), f"{readme.relative_to(ROOT)} does not say its {word}"


def test_every_benchmark_script_is_in_a_readme():
    """Every script under benchmarks/ (a shell script, or a Python file with a ``__main__``
    block) is listed in the README of its folder or one above."""
    unlisted = []
    for script in sorted((ROOT / "benchmarks").rglob("*")):
        if script.suffix not in (".py", ".sh") or "replication_runs" in script.parts:
            continue
        if script.suffix == ".py" and "__main__" not in script.read_text(encoding="utf-8"):
            continue  # a helper module the scripts import, not a script
        folder, listed = script.parent, False
        while not listed and folder != ROOT:
            readme = folder / "README.md"
            listed = readme.exists() and script.name in readme.read_text(encoding="utf-8")
            folder = folder.parent
        if not listed:
            unlisted.append(str(script.relative_to(ROOT)))
    assert not unlisted, "benchmark scripts no README lists:\n" + "\n".join(unlisted)


def test_results_summary_links_every_benchmark_readme_section():
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert text.count("\n|") > 5, "one summary table"
    for target in LINK.findall(text):
        if target.startswith("http"):
            continue
        path, _, anchor = target.partition("#")
        page = (ROOT / "benchmarks" / path) if path else ROOT / "benchmarks" / "RESULTS.md"
        assert page.exists(), target
        if anchor:
            assert anchor in anchors(page), f"{target}: no such section"


def anchors(page):
    """GitHub's heading anchors of a Markdown page."""
    found = set()
    for heading in re.findall(r"^#+\s+(.*)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found

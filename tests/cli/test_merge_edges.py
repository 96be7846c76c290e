"""``oloproof merge`` at its edges: a store that refuses the merged run's end, a source
named twice, and a shard's missing share against the suite's ``max_missing``."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from tests.conftest import run_cli
from tests.store.test_shards import _project

# What a full disk does to the merged run's last write, made by the store itself: SQLite
# refuses the update that marks the run DECIDED (the RUN_ERROR end still goes in).
_REFUSE_DECIDED = (
    "CREATE TRIGGER full_disk BEFORE UPDATE OF status ON runs WHEN NEW.status = 'DECIDED'"
    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
)


def _sql(store: Path, *statements: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(store)) as db:
        rows: list[tuple[object, ...]] = []
        for statement in statements:
            rows = db.execute(statement).fetchall()
        db.commit()
        return rows


def test_a_merged_run_whose_end_the_store_refuses_is_stored_stopped_not_running(
    tmp_path: Path,
) -> None:
    """The store refused the merged run's DECIDED end (a full disk, a lock held past the
    timeout): its row stayed RUNNING, `merge` said only "the store cannot be used", and
    `runs` showed the row as "the process running it ended without finishing" (as though
    it were killed; in a Python process that merged, RUNNING for as long as it lived). The
    merged run is now stored RUN_ERROR/PARTIAL with why, exit 5, and the next merge, once
    the store takes writes, makes a new decided run that `gate latest` reads."""
    root = _project(tmp_path / "p", n=12)
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    store = root / ".oloproof" / "store.sqlite"
    _sql(store, _REFUSE_DECIDED)
    failed = run_cli("merge", cwd=root)
    assert failed.code == 5 and failed.out == "", failed.text
    assert "Traceback" not in failed.err
    (line,) = failed.err.splitlines()
    assert line.startswith("oloproof merge: error: the merged run run_"), line
    assert "could not be stored (database or disk is full): it is stored as stopped" in line
    rows = _sql(store, "SELECT r.id, r.status, r.completeness, r.exit_code, r.stop_reason"
                       " FROM runs r JOIN run_merges m ON m.run_id = r.id")
    assert [row[1:] for row in rows] == [
        ("RUN_ERROR", "PARTIAL", 5, "the merge failed: IntegrityError: database or disk is full")
    ]
    stopped_id = rows[0][0]
    latest = run_cli("gate", "latest", "--json", cwd=root)
    assert latest.code == 5, latest.text
    assert json.loads(latest.out)["status"] == "RUN_ERROR"
    assert json.loads(latest.out)["decisions"] == []
    # The store takes writes again: the shards are merged anew, not "Already merged".
    _sql(store, "DROP TRIGGER full_disk")
    again = run_cli("merge", "--json", cwd=root)
    doc = json.loads(again.out)
    assert doc["already_merged"] is False and doc["run_id"] != stopped_id
    assert (doc["status"], doc["completeness"]) == ("DECIDED", "COMPLETE")
    latest = run_cli("gate", "latest", "--json", cwd=root)
    assert json.loads(latest.out)["run_id"] == doc["run_id"]
    assert latest.code == again.code


def test_a_store_named_twice_is_refused_once_in_one_line(tmp_path: Path) -> None:
    """`merge job-1 job-2 job-1` merged (the second connection to job-1 took the first's
    place, which was dropped unclosed), and `merge job-1 job-1` said "missing slices: 2/2
    ... in job-1 or job-1". A store named twice, by one path or two, is refused, exit 2,
    one line, nothing merged."""
    import shutil

    template = _project(tmp_path / "template", n=12)
    for index in (1, 2):
        shutil.copytree(template, tmp_path / f"job-{index}")
        assert run_cli("run", "--shard", f"{index}/2", cwd=tmp_path / f"job-{index}").code == 5
    merge_root = tmp_path / "merge"
    shutil.copytree(template, merge_root)
    accepted = (": name each store of shards once (accepted: project directories, store files"
                " or postgresql:// URLs, each once)")
    for names, said in (
        (["../job-1", "../job-1"], "../job-1 is named twice"),
        (["../job-1", "../job-2", "../job-1"], "../job-1 is named twice"),
        (["../job-1", "../job-2", "../job-1/.oloproof/store.sqlite"],
         "../job-1 and ../job-1/.oloproof/store.sqlite are the same store"),
    ):
        refused = run_cli("merge", *names, cwd=merge_root)
        assert refused.code == 2 and refused.out == "", refused.text
        assert refused.err.splitlines() == [f"oloproof merge: error: {said}{accepted}"]
    assert not (merge_root / ".oloproof" / "store.sqlite").exists()  # nothing merged
    merged = run_cli("merge", "../job-1", "../job-2", "--json", cwd=merge_root)
    assert json.loads(merged.out)["status"] == "DECIDED", merged.text


def test_a_shard_over_max_missing_says_it_of_its_slice_and_merge_judges_the_suite(
    tmp_path: Path,
) -> None:
    """`max_missing` is the suite's limit. A shard judges it on its own slice (what the
    slice shows; a shard never allows anyway), and said of shard 2/3, 2 of its 10 cases
    missing (20%) against 12%, "Incomplete evidence: ... so the gate blocks (exit 5)
    whatever warn_on says" and "too much is missing to size it", while the merged run of
    the same shards (4 of 35, 11.4%) is within it and decided. The shard now says that its
    share is its slice's and that `merge` judges the suite's (its plan too: "no size below 7
    more cases" of a rule decided at merge is "no size below 17 cases in total"); the merged
    run is the single run of the suite, within the limit (12%) and over it (10%: exit 5), as
    `run` is."""
    import shutil

    for limit, within in ((0.12, True), (0.10, False)):
        root = _project(tmp_path / f"p{limit}", n=40)
        release = root / "release.yaml"
        release.write_text(release.read_text().replace(
            "version: 1\n", f"version: 1\nmax_missing: {limit}\n", 1))
        single_root = tmp_path / f"single{limit}"
        shutil.copytree(root, single_root)
        single = run_cli("run", cwd=single_root)
        shards = [run_cli("run", "--shard", f"{index}/3", cwd=root) for index in (1, 2, 3)]
        assert [s.code for s in shards] == [5, 5, 5]
        over = [s.out for s in shards if "more than max_missing" in s.out]
        assert over, [s.out for s in shards]  # shard 2/3: 2 of its 10 label cases (20%)
        for out in over:
            assert "Incomplete evidence" not in out and "too much is missing" not in out
            assert "The limit is the suite's: `oloproof merge` holds it against the share" in out
            assert "(`oloproof merge` judges the suite's share): see what failed with" in out
            # Its plan, at merge: the floor the share sets is said in cases in total.
            run_id = out.split()[1]
            planned = run_cli("plan", run_id, "--run", cwd=root).out
            assert "the gate holds it as incomplete now" not in planned, planned
            assert "this shard's gate holds it as incomplete: 2 of its 10 cases missing (20.0%)" in planned
            floor = next(n for n in range(1, 100) if 2 / n <= limit)  # 17 at 12%, 20 at 10%
            assert ("`oloproof merge` judges the suite's share, and no size below"
                    f" {floor} cases in total") in planned
        merged = run_cli("merge", "--json", cwd=root)
        doc = json.loads(merged.out)
        assert doc["status"] == "DECIDED" and merged.code == single.code, merged.text
        incomplete = [d["rule"] for d in doc["decisions"] if "over max_missing" in d["detail"]]
        if within:
            assert merged.code == 3 and incomplete == [], doc["decisions"]
        else:
            assert merged.code == 5 and "label-floor" in incomplete
            assert "Incomplete evidence: label-floor" in run_cli("gate", "latest", cwd=root).out


SOME_UNANSWERED = """
from oloproof import system

@system(name="right", version="1")
def answer(case_input):
    if case_input["n"] % 7 == 0:
        raise RuntimeError("no answer")
    return {"label": "ok"}
"""


def test_a_shard_s_plan_sizes_re_running_its_missing_cases_at_merge_too(
    tmp_path: Path,
) -> None:
    """`plan SHARD --run` sized the rule at merge (on the suite's cases) but what
    re-running the shard's missing cases would do in the shard's own: shard 1/3 of a suite
    of 30, every answer right against `min: 0.8`, said "re-running the 2 missing cases: if
    they resemble the rest, 7 more would decide it (17 in total)" under a rule "decided at
    merge, on the 30 cases of the suite". It is now said at merge as the rule's size is:
    none beyond a suite of 30, 8 more of a suite of 9. 17 is the least n whose 95%
    Clopper-Pearson lower bound at n of n clears 0.8 (scipy)."""
    from scipy.stats import beta
    from tests.conftest import write_project

    from oloproof.api._subset import shard_of

    need = next(n for n in range(1, 100) if beta.ppf(0.025, n, 1) >= 0.8)
    release = ("version: 1\nmax_missing: 0.5\nrules:\n  - id: floor\n    metric: exact_label\n"
               "    min: 0.8\n")
    for suite in (9, 30):
        cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
                 for i in range(suite)]
        root = write_project(tmp_path / f"p{suite}", app=SOME_UNANSWERED, release=release,
                             cases=cases)
        for index in (1, 2, 3):
            assert run_cli("run", "--shard", f"{index}/3", cwd=root).code == 5
        # A shard holding a case the system does not answer (n % 7 == 0).
        index = next(shard_of(c["id"], 3) for c in cases if c["input"]["n"] % 7 == 0)
        runs = json.loads(run_cli("runs", "--json", cwd=root).out)
        shard_runs = [r["id"] for r in runs if r["completeness"] == "SUBSET"]
        for run_id in shard_runs:
            planned = json.loads(run_cli("plan", run_id, "--run", "--json", cwd=root).out)
            (rule,) = planned["rules"]
            if rule["scope"]["shard"] == f"{index}/3":
                break
        else:
            raise AssertionError(f"no plan of shard {index}/3")
        resolved = rule["if_resolved"]
        assert resolved["missing"] >= 1 and resolved["total"] == need, resolved
        assert resolved["more"] == max(0, need - suite)
        text = run_cli("plan", run_id, "--run", cwd=root).out
        they = "it resembles" if resolved["missing"] == 1 else "they resemble"
        if resolved["more"]:
            assert (f"if {they} the rest, about {need - suite} more cases of the suite"
                    f" would decide it ({need} in total)") in text, text
        else:
            assert "would decide it, so the merged run of the suite would" in text, text

"""Values PostgreSQL holds differently from SQLite, end to end on a real server
(tests/pgserver.py): each is stored as on SQLite, or refused before anything is called;
never a run that calls every case and then cannot store them."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_project

APP = """
from pathlib import Path
from oloproof import system

@system(name="counted", version="1")
def answer(case_input):
    with open(Path(__file__).with_name("calls"), "a") as f:
        f.write("x")
    return {"label": "ok"}
"""
FLOOR = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
EACH_GROUP = FLOOR + "    each_group: true\n"
GROUPED = """
- type: exact_match
  criterion: exact_label
  field: label
  group_by: [lang]
"""


def _cases(n: int, ids: dict[int, str] | None = None,
           langs: list[str] | None = None) -> list[dict[str, Any]]:
    cases = []
    for i in range(n):
        case: dict[str, Any] = {"id": (ids or {}).get(i, f"q{i:03d}"), "input": {"n": i},
                                "expected": {"label": "ok"}}
        if langs:
            case["metadata"] = {"lang": langs[i % len(langs)]}
        cases.append(case)
    return cases


def _both(tmp_path: Path, pg_url: str, **project: Any) -> tuple[Any, Any, Path]:
    """The project run on the SQLite store and on the team store: (sqlite, team, team root)."""
    local, team = tmp_path / "local", tmp_path / "team"
    for root in (local, team):
        write_project(root, app=APP, **project)
    on_sqlite = run_cli("run", cwd=local)
    on_team = run_cli("run", cwd=team, env={"OLOPROOF_STORE": pg_url})
    return on_sqlite, on_team, team


def _nothing_run(team: Path, pg_url: str) -> None:
    assert not (team / "calls").exists()  # not one case called
    runs = run_cli("runs", "--json", cwd=team, env={"OLOPROOF_STORE": pg_url})
    assert runs.code == 2 and "no runs in the team store" in runs.err, runs.text


def _random_text(n: int) -> str:
    rng = random.Random(n)  # incompressible: PostgreSQL cannot squeeze it into its index
    return "".join(rng.choice(string.ascii_letters) for _ in range(n))


def test_case_ids_the_team_store_would_store_as_one_are_refused_before_any_call(
    tmp_path: Path, pg_url: str
) -> None:
    """'dup\\x00' and 'dup\\ufffd' are two cases on SQLite; PostgreSQL writes the NUL as
    U+FFFD. The run called 32 of 60 cases, then could not commit ("ON CONFLICT DO UPDATE
    command cannot affect row a second time"): RUN_ERROR, exit 5."""
    cases = _cases(60, {0: "dup\x00", 1: "dup\ufffd"})
    on_sqlite, on_team, team = _both(tmp_path, pg_url, cases=cases, release=FLOOR)
    assert on_sqlite.code == 0, on_sqlite.text
    assert on_team.code == 2, on_team.text
    assert "the case ids 'dup\\x00' and 'dup\ufffd' would be one in a team store" in on_team.err
    assert "nothing was run" in on_team.err and "Traceback" not in on_team.err
    _nothing_run(team, pg_url)


def test_a_case_id_too_long_for_the_index_is_refused_before_any_call(
    tmp_path: Path, pg_url: str
) -> None:
    """6,000 random letters: "index row size 6048 exceeds btree version 4 maximum 2704"
    at the first commit, after the cases were called (exit 5); SQLite stores it."""
    long_id = _random_text(6000)
    on_sqlite, on_team, team = _both(tmp_path, pg_url, cases=_cases(60, {5: long_id}),
                                     release=FLOOR)
    assert on_sqlite.code == 0, on_sqlite.text
    assert on_team.code == 2, on_team.text
    assert f"the case id '{long_id[:40]}…' is 6,000 bytes long" in on_team.err
    assert "beside the criterion 'exact_label'" in on_team.err
    _nothing_run(team, pg_url)


def test_a_case_id_at_the_limit_is_stored_and_read_back(tmp_path: Path, pg_url: str) -> None:
    """The limit leaves room: an id of exactly what it allows is stored, decided and read
    as on SQLite."""
    from oloproof.store.pgshared import KEY_TEXT_BYTES

    longest = _random_text(KEY_TEXT_BYTES - len("exact_label"))
    on_sqlite, on_team, team = _both(tmp_path, pg_url, cases=_cases(60, {5: longest}),
                                     release=FLOOR)
    assert on_sqlite.code == on_team.code == 0, on_team.text
    shown = run_cli("inspect", "latest", "--json", cwd=team, env={"OLOPROOF_STORE": pg_url})
    assert shown.code == 0, shown.text
    assert longest in {c["id"] for c in json.loads(shown.out)["cases"]}


def test_groups_the_team_store_would_decide_as_one_are_refused_before_any_call(
    tmp_path: Path, pg_url: str
) -> None:
    """each_group makes a rule per group, 'floor[lang=a\\x00]' and 'floor[lang=a\\ufffd]':
    one key on PostgreSQL. Every case was called and judged, then the decisions could not
    be stored ("duplicate key value violates unique constraint decisions_pkey"): RUN_ERROR,
    exit 5, where SQLite decided."""
    on_sqlite, on_team, team = _both(tmp_path, pg_url, cases=_cases(80, langs=["a\x00", "a\ufffd"]),
                                     evaluators=GROUPED, release=EACH_GROUP)
    assert on_sqlite.code == 0, on_sqlite.text
    assert on_team.code == 2, on_team.text
    assert "the rule ids 'floor[lang=a\\x00]' and 'floor[lang=a\ufffd]' would be one" in on_team.err
    _nothing_run(team, pg_url)


def test_a_group_value_too_long_for_the_index_is_refused_before_any_call(
    tmp_path: Path, pg_url: str
) -> None:
    long_value = _random_text(6000)
    on_sqlite, on_team, team = _both(tmp_path, pg_url, cases=_cases(80, langs=[long_value, "b"]),
                                     evaluators=GROUPED, release=EACH_GROUP)
    assert on_sqlite.code == 0, on_sqlite.text
    assert on_team.code == 2, on_team.text
    assert f"the rule id 'floor[lang={long_value[:29]}…' (a group's" in on_team.err
    assert "6,012 bytes long" in on_team.err
    _nothing_run(team, pg_url)


def test_store_push_of_a_run_whose_ids_the_team_store_would_merge_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    """A local run of 60 cases with ids 'dup\\x00' and 'dup\\ufffd' was pushed as "copied":
    its insert's ON CONFLICT DO NOTHING kept 59 cases, and the team store's copy silently
    lacked one (59 rows of run_cases, 59 judgments, beside decisions made on 60)."""
    from tests.conftest import Backend

    root = write_project(tmp_path / "p", app=APP, cases=_cases(60, {0: "dup\x00", 1: "dup\ufffd"}),
                         release=FLOOR)
    assert run_cli("run", cwd=root).code == 0
    pushed = run_cli("store", "push", cwd=root, env={"OLOPROOF_STORE": pg_url})
    assert pushed.code == 2, pushed.text
    assert "the case ids 'dup\\x00' and 'dup\ufffd' would be one" in pushed.err
    assert "was not pushed" in pushed.err and "copied" not in pushed.out
    team = Backend("postgresql", pg_url)
    assert team.count(root, "runs") == team.count(root, "run_cases") == 0


def test_store_push_of_a_run_with_an_id_too_long_for_the_index_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    long_id = _random_text(6000)
    root = write_project(tmp_path / "p", app=APP, cases=_cases(60, {5: long_id}), release=FLOOR)
    assert run_cli("run", cwd=root).code == 0
    pushed = run_cli("store", "push", cwd=root, env={"OLOPROOF_STORE": pg_url})
    assert pushed.code == 2, pushed.text
    assert f"the case id '{long_id[:40]}…' is 6,000 bytes long" in pushed.err
    assert "was not pushed" in pushed.err


def _split(ids: list[str]) -> list[str]:
    """``ids`` in the order of their shards of 2: the first in shard 1, the last in 2."""
    from oloproof.api._subset import shard_of

    return sorted(ids, key=lambda i: shard_of(i, 2))


def test_a_shard_is_refused_keys_that_collide_with_another_shard_s(
    tmp_path: Path, pg_url: str
) -> None:
    """Each shard was checked over its own slice: 'a\\x00' cases all in shard 1/2 and
    'a\\ufffd' cases all in 2/2 (or the case ids 'dup\\x00' and 'dup\\ufffd' in two
    slices) passed, both shards called every case, and the collision came at `merge`. A
    shard is now checked over its whole suite: refused before any call, exit 2; on SQLite
    the same shards run."""
    from oloproof.api._subset import shard_of

    cases = _cases(40)
    for case in cases:
        case["metadata"] = {"lang": "a\x00" if shard_of(case["id"], 2) == 1 else "a\ufffd"}
    pair = next(p for p in ((f"dup{n}\x00", f"dup{n}\ufffd") for n in range(100))
                if shard_of(p[0], 2) != shard_of(p[1], 2))
    ids = _cases(40, dict(enumerate(_split(list(pair)))))
    for name, project, words in (
        ("groups", {"cases": cases, "evaluators": GROUPED, "release": EACH_GROUP},
         "the rule ids 'floor[lang=a\\x00]' and 'floor[lang=a\ufffd]' would be one"),
        ("ids", {"cases": ids, "release": FLOOR},
         "would be one in a team store"),
    ):
        local, team = tmp_path / name / "local", tmp_path / name / "team"
        for root in (local, team):
            write_project(root, app=APP, **project)
        for index in (1, 2):
            on_sqlite = run_cli("run", "--shard", f"{index}/2", cwd=local)
            assert on_sqlite.code == 5, on_sqlite.text  # a shard never allows
            on_team = run_cli("run", "--shard", f"{index}/2", cwd=team,
                              env={"OLOPROOF_STORE": pg_url})
            assert on_team.code == 2, on_team.text
            assert words in on_team.err, on_team.err
            assert "a shard is checked over its whole suite" in on_team.err
            assert "Traceback" not in on_team.err
        assert not (team / "calls").exists()  # not one case called


def test_merging_local_shards_into_a_team_store_checks_the_merged_keys(
    tmp_path: Path, pg_url: str
) -> None:
    """Shards run on SQLite stores, 'a\\x00' cases all in 1/2 and 'a\\ufffd' all in 2/2
    (and the ids 'dup\\x00', 'dup\\ufffd' in two slices), merged by a project on a team
    store: each shard run was copied (each alone fits), then the merged run could not be
    stored. Refused before anything is copied or stored, exit 2."""
    from oloproof.api._subset import shard_of

    cases = _cases(40)
    for case in cases:
        case["metadata"] = {"lang": "a\x00" if shard_of(case["id"], 2) == 1 else "a\ufffd"}
    pair = next(p for p in ((f"dup{n}\x00", f"dup{n}\ufffd") for n in range(100))
                if shard_of(p[0], 2) != shard_of(p[1], 2))
    ids = _cases(40, dict(enumerate(_split(list(pair)))))
    for name, project, words in (
        ("groups", {"cases": cases, "evaluators": GROUPED, "release": EACH_GROUP},
         "the rule ids 'floor[lang=a\\x00]' and 'floor[lang=a\ufffd]' would be one"),
        ("ids", {"cases": ids, "release": FLOOR}, "would be one in a team store"),
    ):
        jobs = []
        for index in (1, 2):
            root = write_project(tmp_path / name / f"job-{index}", app=APP, **project)
            assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
            jobs.append(str(root / ".oloproof" / "store.sqlite"))
        merger = write_project(tmp_path / name / "merge", app=APP, **project)
        merged = run_cli("merge", *jobs, cwd=merger, env={"OLOPROOF_STORE": pg_url})
        assert merged.code == 2, merged.text
        assert words in merged.err and "nothing was merged" in merged.err, merged.err
        assert "Traceback" not in merged.err
        runs = run_cli("runs", "--json", cwd=merger, env={"OLOPROOF_STORE": pg_url})
        assert runs.code == 2 and "no runs in the team store" in runs.err, runs.text

"""docs/pipelines.md shows the example scripts CI runs, byte for byte (tests/pipelines/doc_examples.py)."""

from __future__ import annotations

from tests.pipelines.doc_examples import PAGE, REPO, examples, with_files

SCRIPTS = ["docs/examples/review_pipeline.py", "docs/examples/review_pipeline.sh"]


def test_the_page_shows_each_example_script_once() -> None:
    shown = examples(PAGE.read_text(encoding="utf-8"))
    assert sorted(shown) == SCRIPTS


def test_the_page_shows_exactly_the_scripts_ci_runs() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for path, text in examples(page).items():
        assert text == (REPO / path).read_text(encoding="utf-8"), (
            f"docs/pipelines.md shows another text than {path}: run `python -m tests.pipelines.doc_examples`"
        )
    assert with_files(page) == page

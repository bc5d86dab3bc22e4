"""Nothing a rule file contains may crash, hang or mislead kvrules.

One regression test per known reproducer of a broken rule file. Each builds a policy
directory from the shipped rules plus the reproducer's broken file (kept under
``tests/files/bad_rules/<name>/``; the huge ones are generated here), then runs both
``kvrules rules check`` and ``kvrules classify`` as whole processes: each must end with a
located diagnostic and a stable code, exit 1 or 2, no traceback, well within the timeout.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvrules.policy import codes
from kvrules.policy.compiler import MAX_POLICY_RULES
from kvrules.policy.yamlpos import MAX_FILE_BYTES, YamlSyntaxError, load_with_positions

ROOT = Path(__file__).resolve().parent.parent
BAD = Path(__file__).resolve().parent / "files" / "bad_rules"
EXAMPLE = ROOT / "examples" / "dense-legacy-stamp-format"
TIMEOUT = 30  # seconds per process; each takes about 1 s alone

RULE = """  - id: fuzz.r{i}
    description: generated rule {i}
    when:
      - fact: cell
        where: {{cell_id: fpm-x}}
    then: {{fail: {{group: dense_synthetic_kv, condition: D9, reason: "r{i}"}}}}
    reason: "r{i}"
"""


def _policy(tmp_path: Path, extra: dict[str, bytes]) -> Path:
    target = tmp_path / "rules"
    target.mkdir()
    for entry in sorted((ROOT / "rules").glob("*.yaml")):
        shutil.copyfile(entry, target / entry.name)
    for name, data in extra.items():
        (target / name).write_bytes(data)
    return target


def _generated(start: int, count: int) -> bytes:
    return ("rules:\n" + "".join(RULE.format(i=i) for i in range(start, start + count))).encode()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvrules", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=TIMEOUT)


# name -> (file the diagnostic names, line or None, code, words of the message)
CASES = {
    "rules-hang-billion-laughs": ("topology.yaml", 5, codes.RULE_LIMIT_ERROR, "aliases expand"),
    "rules-traceback-deep-yaml-nesting": ("zz_deep.yaml", 1, codes.RULE_LIMIT_ERROR,
                                          "nesting deeper than 64"),
    "rules-traceback-engine-refuses-inf-literal": ("cache_kinds.yaml", 39,
                                                   codes.RULE_VALUE_ERROR, "not a finite"),
    "rules-traceback-engine-refuses-list-operand": ("stamps.yaml", 48, codes.RULE_TYPE_ERROR,
                                                    "lt needs a single value"),
    "rules-traceback-nul-character": ("engine_identity.yaml", 42, codes.RULE_ENCODING_ERROR,
                                      "U+0000"),
    "rules-traceback-recursive-alias": ("zz_recursive.yaml", 2, codes.RULE_YAML_ERROR,
                                        "recursive alias"),
    "rules-traceback-unknown-yaml-tag": ("policy.yaml", 3, codes.RULE_YAML_ERROR, "!custom"),
    "rules-traceback-utf16-rule-file": ("warmup.yaml", 1, codes.RULE_ENCODING_ERROR,
                                        "UTF-16 byte-order mark"),
}


def _repro_files(name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((BAD / name).iterdir())}


def _assert_diagnosed(policy: Path, file: str, line: int | None, code: str, words: str) -> str:
    where = f"{policy}/{file}:" + (f"{line}:" if line is not None else "")
    outputs = []
    for args in (("rules", "check", str(policy)),
                 ("classify", str(EXAMPLE), "--rules", str(policy))):
        proc = _run(*args)
        text = proc.stdout + proc.stderr
        assert proc.returncode in (1, 2), (args, proc.returncode, text)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert where in text and code in text and words in text, text
        outputs.append(text)
    return outputs[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_rule_file_is_a_located_diagnostic(name: str, tmp_path: Path) -> None:
    file, line, code, words = CASES[name]
    _assert_diagnosed(_policy(tmp_path, _repro_files(name)), file, line, code, words)


def test_twenty_thousand_rules_do_not_hang(tmp_path: Path) -> None:
    """rules-hang-20000-rules: a 4 MiB file is refused before the parser sees it."""
    policy = _policy(tmp_path, {"zz_huge.yaml": _generated(0, 20000)})
    _assert_diagnosed(policy, "zz_huge.yaml", 1, codes.RULE_LIMIT_ERROR,
                      f"larger than {MAX_FILE_BYTES} bytes")


def test_five_thousand_rules_refused_alike_by_check_and_classify(tmp_path: Path) -> None:
    """rules-inconsistent-5000-rules: the single 1 MiB file of the reproducer, and the same
    rules split into files under the size limit: check and classify report the same limit."""
    (tmp_path / "single").mkdir()
    single = _policy(tmp_path / "single", {"zz_huge.yaml": _generated(0, 5000)})
    _assert_diagnosed(single, "zz_huge.yaml", 1, codes.RULE_LIMIT_ERROR, "larger than")
    (tmp_path / "split").mkdir()
    split = _policy(tmp_path / "split", {f"zz_huge{k}.yaml": _generated(1000 * k, 1000)
                                         for k in range(5)})
    _assert_diagnosed(split, "zz_huge0.yaml", 2, codes.RULE_LIMIT_ERROR,
                      f"kvrules takes at most {MAX_POLICY_RULES}")


@pytest.mark.parametrize("text, code, words", [
    ("a: &x [1, 2]\nb: *x\n", None, None),                     # a small alias is fine
    ("a: 1\na: 2\n", codes.RULE_YAML_ERROR, "duplicate key"),
    ("a: 9223372036854775808\n", codes.RULE_VALUE_ERROR, "64-bit"),
    ("a: .nan\n", codes.RULE_VALUE_ERROR, "not a finite"),
    ("a: 2024-01-01\n", codes.RULE_VALUE_ERROR, "quote it"),
    ("a: !!binary aGk=\n", codes.RULE_YAML_ERROR, "unsupported YAML tag"),
    ("a: !!set {x}\n", codes.RULE_YAML_ERROR, "unsupported YAML tag"),
    ("? [k]\n: v\n", codes.RULE_YAML_ERROR, "plain string"),
    ("a: *nope\n", codes.RULE_YAML_ERROR, "nope"),
    ("a: b: c\n", codes.RULE_YAML_ERROR, "not allowed"),
])
def test_loader_refuses_what_the_engine_cannot_take(text: str, code: str | None,
                                                    words: str | None) -> None:
    if code is None:
        assert load_with_positions(text)[0] == {"a": [1, 2], "b": [1, 2]}
        return
    with pytest.raises(YamlSyntaxError) as info:
        load_with_positions(text)
    assert info.value.code == code and words in str(info.value)
    assert info.value.line >= 1 and info.value.column >= 1

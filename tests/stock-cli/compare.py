#!/usr/bin/env python3
"""Compare the stock simple_switch_CLI's output.

golden OUT EXPECTED: BMv2's CLI test runner's rule (run_one_test.py; shared/reference/
    runtime-cli.md section 4): everything before the first prompt is dropped, the output is cut
    into the blocks between consecutive 'RuntimeCmd: ' prompts (text after the last prompt is
    ignored), EXPECTED into the blocks between consecutive '????' lines; same number of blocks,
    each byte for byte.
cross OUT REFERENCE: the same blocks, joined, against REFERENCE (what `tern cli prog.json`
    prints for the same commands in-process, with no prompts).
Exit 0 when equal; otherwise print the first difference and exit 1.
"""
import sys

PROMPT = "RuntimeCmd: "


def cli_blocks(text):
    parts = text.split(PROMPT)
    if len(parts) < 2:
        return None
    # parts[0] is before the first prompt; parts[-1] after the last one.
    return parts[1:-1]


def golden_blocks(text):
    lines = text.splitlines(keepends=True)
    marks = [i for i, l in enumerate(lines) if l.rstrip("\n") == "????"]
    return ["".join(lines[a + 1:b]) for a, b in zip(marks, marks[1:])]


def main():
    mode, out_file, ref_file = sys.argv[1:4]
    with open(out_file, encoding="utf-8", errors="replace") as f:
        out = f.read()
    with open(ref_file, encoding="utf-8", errors="replace") as f:
        ref = f.read()
    got = cli_blocks(out)
    if got is None:
        print(f"no '{PROMPT}' prompt in the CLI output:\n{out}")
        return 1
    if mode == "golden":
        want = golden_blocks(ref)
        if len(got) != len(want):
            print(f"{len(got)} command outputs, expected {len(want)}")
            print("".join(PROMPT + b for b in got))
            return 1
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                print(f"command {i + 1}: got\n{g!r}\nexpected\n{w!r}")
                return 1
        return 0
    if mode == "cross":
        if not ref:
            print("the reference output is empty")
            return 1
        joined = "".join(got)
        if joined != ref:
            for i, (g, w) in enumerate(zip(joined.splitlines(), ref.splitlines())):
                if g != w:
                    print(f"line {i + 1}: stock CLI {g!r}, tern cli {w!r}")
                    return 1
            print(f"stock CLI printed {len(joined)} bytes, tern cli {len(ref)}")
            return 1
        return 0
    print(f"unknown mode {mode}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every relative link and anchor in README.md and docs/ resolves, by GitHub's rules.

    check_links.py SOURCE_DIR

A link [text](target) whose target is relative (no scheme, not mailto:) must name a file or
directory of the tree; a #fragment must be an anchor of the file it names (or of the page itself
for a bare #fragment): a heading's anchor as GitHub makes it, or an explicit <a name|id>. The
runbook_url of every alert rule in packaging/prometheus/ that points into docs/ must resolve the
same way, and every alert of those rules must have a heading named after it in docs/operating.md,
for its runbook. Exits 1, naming each broken link with its file and line. Quick: reads a few files.
"""
import os
import re
import sys
import unicodedata
from collections import Counter

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target "title") and ![alt](target); nested brackets in the text are rare enough here.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+(\S+)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def heading_text(raw):
    """The text GitHub renders for a heading: no code ticks, link text only, no emphasis."""
    text = INLINE_CODE.sub(lambda m: m.group(2), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"(\*\*|__|\*|_(?=\W)|(?<=\W)_)", "", text)


def slug(text):
    """GitHub's anchor for a heading: lower case; only letters, digits, '-', '_' and spaces kept;
    each space a '-'."""
    out = []
    for ch in text.lower():
        if ch in "-_ " or ch.isalnum() or unicodedata.category(ch) in ("Mn", "Pc"):
            out.append("-" if ch == " " else ch)
    return "".join(out)


def strip_code_spans(line):
    return INLINE_CODE.sub("", line)


def markdown_lines(path):
    """(number, line) of the lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1) == fence:
                    fence = None
                continue
            if fence is None:
                yield number, line.rstrip("\n")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = Counter(), set()
        for _, line in markdown_lines(path):
            found.update(EXPLICIT_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(heading_text(m.group(2)))
            anchor = base if seen[base] == 0 else f"{base}-{seen[base]}"
            seen[base] += 1
            found.add(anchor)
        cache[path] = found
    return cache[path]


def check_target(root, page, target):
    """None if `target`, written in `page`, resolves; else why not."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return None  # absolute: not this test's business
    path, _, fragment = target.partition("#")
    path = path.split("?", 1)[0]
    if path:
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
        if not os.path.realpath(resolved).startswith(os.path.realpath(root) + os.sep):
            return f"{path} leaves the tree"
        if not os.path.exists(resolved):
            return f"{path} does not exist"
    else:
        resolved = page
    if fragment:
        if not resolved.endswith(".md") or os.path.isdir(resolved):
            return f"#{fragment} on {path}, which is not a Markdown file"
        if fragment not in anchors(resolved):
            return f"{os.path.relpath(resolved, root)} has no anchor #{fragment}"
    return None


def pages(root):
    found = [os.path.join(root, "README.md")]
    for directory, _, files in os.walk(os.path.join(root, "docs")):
        found += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".md")]
    return found


def rule_lines(root):
    """(file, line number, line) of the alert rules in packaging/prometheus/ (not their tests)."""
    directory = os.path.join(root, "packaging", "prometheus")
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith((".yml", ".yaml")) or ".test." in name:
            continue
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                yield path, number, line


def runbook_links(root):
    """(file, line, target relative to the tree) of every runbook_url into docs/."""
    for path, number, line in rule_lines(root):
        m = re.search(r"runbook_url:\s*['\"]?([^'\"\s]+)", line)
        if m and (m.group(1).startswith("docs/") or "/docs/" in m.group(1)):
            yield path, number, "docs/" + m.group(1).split("docs/", 1)[1]


def alerts_without_runbook(root):
    """Problems for the alerts that docs/operating.md has no heading for."""
    runbook = os.path.join(root, "docs", "operating.md")
    for path, number, line in rule_lines(root):
        m = re.match(r"^\s*-\s*alert:\s*(\S+)", line)
        if m and (not os.path.exists(runbook) or slug(m.group(1)) not in anchors(runbook)):
            yield (f"{os.path.relpath(path, root)}:{number}: (alert {m.group(1)}): docs/operating.md "
                   f"has no heading '### {m.group(1)}' for its runbook")


def broken_links(root):
    problems, count = [], 0
    for page in pages(root):
        for number, line in markdown_lines(page):
            text = strip_code_spans(line)
            for target in LINK.findall(text) + REFERENCE_DEF.findall(text):
                count += 1
                why = check_target(root, page, target)
                if why:
                    problems.append(f"{os.path.relpath(page, root)}:{number}: ({target}): {why}")
    for path, number, target in runbook_links(root):
        count += 1
        why = check_target(root, os.path.join(root, "README.md"), target)
        if why:
            problems.append(f"{os.path.relpath(path, root)}:{number}: ({target}): {why}")
    problems += alerts_without_runbook(root)
    return problems, count


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    problems, count = broken_links(os.path.abspath(sys.argv[1]))
    for problem in problems:
        print(problem)
    if count == 0:
        sys.exit("no links found: the test looked in the wrong place")
    print(f"{count} links checked, {len(problems)} broken")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks every relative link and image in the tree's Markdown files: the
file it names exists, and a #fragment names a heading of that file. Links
inside code fences and to URLs (http:, mailto:, ...) are not checked.

    python3 .ci/check-links.py
"""
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
files = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True,
                       check=True).stdout.split()
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to -."""
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                text = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
                out.add(text.replace(" ", "-"))
    return out


broken = 0
for md in files:
    in_fence = False
    with open(md, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
            if in_fence:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, frag = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(full):
                    print(f"{md}:{n}: no such file: {target}")
                    broken += 1
                elif frag and full.endswith(".md") and frag not in anchors(full):
                    print(f"{md}:{n}: no such heading: {target}")
                    broken += 1
print(f"links: {len(files)} Markdown files, {broken} broken")
sys.exit(1 if broken else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that the man pages agree with the public headers on errors, and
that every page reads with `man -l` from the source tree.

For each public function returning int (each `TL_API int` declaration in
include/tickloop/*.h), the errors are the negative errno names (-EINVAL,
...) in the comment just above its declaration; the header is the
reference. Declarations that follow each other without a comment between
them share the comment above the first. A name after "never" ("Never
-EBUSY") is not an error of the function.

On the man side, the function's page is man/man3/<name>.3 (an alias's link
leads to the page of its family). Each entry of its ERRORS section
(`.TP` / `.B \\-EXXX` / text) belongs to the functions named in a
parenthesis at the start of the text, "(tl_timer_start, tl_timer_again)",
or, without one, to every function of the page that returns int.

Failures, each naming function, errno and files:
  - an errno in the header comment that the page's ERRORS section does not
    give for that function;
  - an errno the page gives for a function whose header comment does not
    list it, unless that comment leaves the list open ("or the kernel's
    errno", "or a negative errno from the kernel", "...");
  - a page that does not render with `man -l PAGE` from the repository root
    (the source tree), or renders with a warning;
  - a page of man3 (not an alias) that tickloop(7) does not list.

KNOWN below lists the disagreements where the header is the one that is
wrong, until it is fixed.

Usage: python3 .ci/check-man-errors.py   (from anywhere; exit 1 on failure)
"""

import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HEADERS = ["include/tickloop/tickloop.h", "include/tickloop/timer_backend.h"]
ERRNO = re.compile(r"-(E[A-Z0-9]{2,})\b")
# A header comment that ends its list with these admits other errnos.
OPEN_ENDED = re.compile(r"the kernel's errno|negative errno from the kernel|"
                        r"another negative errno|-E[A-Z0-9]+, \.\.\.", re.I)


def header_functions():
    """name -> (header path, line, returns_int, errnos, open_ended)."""
    funcs = {}
    for rel in HEADERS:
        lines = open(os.path.join(ROOT, rel)).read().split("\n")
        comment, comment_end = "", -2
        in_comment, buf = False, []
        last_decl = -2
        for i, line in enumerate(lines):
            s = line.strip()
            if not in_comment and s.startswith("/*"):
                in_comment, buf = True, []
            if in_comment:
                buf.append(s)
                if "*/" in s:
                    in_comment = False
                    comment, comment_end = " ".join(buf), i
                continue
            m = re.match(r"TL_API\s+(.*?)\b(tl_\w+)\s*\(", line)
            if m:
                # The comment ending on the line above, or the one shared by
                # a group of declarations without comments between them.
                if comment_end == i - 1 or last_decl == i - 1:
                    text = comment
                else:
                    text = ""
                returns_int = m.group(1).split() == ["int"]
                errnos = []
                for e in ERRNO.finditer(text):
                    before = text[max(0, e.start() - 12):e.start()].lower()
                    if "never" in before:
                        continue
                    # "-EBADF is not an error"; "makes tl_loop_free return
                    # -EBUSY": not errors of this function.
                    if text[e.end():e.end() + 16].startswith(" is not an error"):
                        continue
                    # "completes the queued writes with -ECANCELED": a
                    # callback's status, not this function's return.
                    if re.search(r"\bcomplet\w*\b[^.;()]*\bwith\s+$",
                                 text[max(0, e.start() - 60):e.start()]):
                        continue
                    other = re.search(r"\b(tl_\w+) returns?\s+$", text[:e.start()])
                    if other and other.group(1) != m.group(2):
                        continue
                    if e.group(1) not in errnos:
                        errnos.append(e.group(1))
                funcs[m.group(2)] = (rel, i + 1, returns_int, errnos,
                                     bool(OPEN_ENDED.search(text)))
                # Continuation lines of a declaration keep the group going.
                j = i
                while not lines[j].rstrip().endswith(";") and j + 1 < len(lines):
                    j += 1
                last_decl = j
    return funcs


def page_path(fn):
    return os.path.join("man", "man3", fn + ".3")


def man_sections(path):
    """section name -> list of source lines."""
    sections, cur = {}, None
    for line in open(os.path.join(ROOT, path)).read().split("\n"):
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            cur = m.group(1).strip().upper()
            sections[cur] = []
        elif cur:
            sections[cur].append(line)
    return sections


def page_names(sections):
    text = " ".join(sections.get("NAME", []))
    return re.findall(r"\btl_\w+", text.split("\\-")[0])


def man_errors(path, page_funcs, fallible):
    """function -> set of errnos the page's ERRORS section gives it."""
    sections = man_sections(path)
    out = {f: set() for f in page_funcs}
    lines = sections.get("ERRORS", [])
    i = 0
    while i < len(lines):
        if lines[i].strip() == ".TP" and i + 1 < len(lines):
            tag = lines[i + 1]
            errnos = re.findall(r"\\?-(E[A-Z0-9]{2,})\b", tag) or \
                re.findall(r"\b(E[A-Z0-9]{2,})\b", tag)
            body = []
            k = i + 2
            while k < len(lines) and lines[k].strip() != ".TP":
                body.append(lines[k])
                k += 1
            text = " ".join(body).strip()
            # Text that starts with "(tl_timer_start, tl_timer_again)" belongs
            # to the functions of that and of any later such parenthesis
            # ("(tl_loop_new) ...; (tl_loop_free) loop is NULL"); text that
            # starts otherwise belongs to every fallible function of the page
            # (a parenthesis further on then qualifies a part of it).
            named = []
            groups = re.finditer(r"\((tl_\w+(?:(?:,\s*|\s+and\s+|\s+or\s+)tl_\w+)*)"
                                 r"(?:,[^)]*)?\)", text)
            for g in groups if text.startswith("(") else ():
                named += [f for f in re.findall(r"\btl_\w+", g.group(1)) if f not in named]
            owners = named or [f for f in page_funcs if f in fallible]
            for f in owners:
                out.setdefault(f, set()).update(errnos)
            i = k
        else:
            i += 1
    return out


def render_problems(page):
    env = dict(os.environ, MANWIDTH="80")
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", page], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        return (r.stderr.strip() or f"exit status {r.returncode}, no output")
    if r.stderr.strip():
        return r.stderr.strip()
    return None


# Disagreements where the header, not the man page, is wrong, each with the
# reason; tolerated (printed as "known") until the header is fixed. An entry
# that no longer disagrees fails the check, so that it is removed.
KNOWN = {
    # ("tl_timer_start", "ENOSPC"): "why the header, not the page, is wrong",
}


def main():
    failures = []
    funcs = header_functions()
    int_funcs = {f for f, v in funcs.items() if v[2]}
    # Functions that return int and list an error; the others (tl_timer_active,
    # tl_loop_alive: 1 or 0) take no unattributed ERRORS entry.
    fallible = {f for f in int_funcs if funcs[f][3]}
    cache = {}
    for fn in sorted(int_funcs):
        rel, line, _, h_errnos, open_ended = funcs[fn]
        path = page_path(fn)
        if not os.path.exists(os.path.join(ROOT, path)):
            failures.append(f"{fn}: no man page {path}")
            continue
        real = os.path.relpath(os.path.realpath(os.path.join(ROOT, path)), ROOT)
        if real not in cache:
            sections = man_sections(real)
            cache[real] = man_errors(real, page_names(sections), fallible)
        m_errnos = cache[real].get(fn)
        if m_errnos is None:
            failures.append(f"{fn}: {real} does not name {fn} in its NAME section")
            continue
        where = f"{rel}:{line}"
        for e in h_errnos:
            if e not in m_errnos:
                failures.append(f"{fn}: -{e} is in the header ({where}) but not in {real}'s "
                                f"ERRORS for {fn}")
        for e in sorted(m_errnos - set(h_errnos)):
            if open_ended:
                continue
            failures.append(f"{fn}: -{e} is in {real}'s ERRORS for {fn} but not in the "
                            f"header's comment ({where})")

    pages = sorted(os.path.join(d, p) for d in ("man/man3", "man/man7")
                   for p in os.listdir(os.path.join(ROOT, d)))
    for page in pages:
        problem = render_problems(page)
        if problem:
            failures.append(f"{page}: `man -l {page}` from the source tree: {problem}")

    # tickloop(7) lists every page of man3 that is not an alias.
    index = open(os.path.join(ROOT, "man/man7/tickloop.7")).read()
    for page in pages:
        name = os.path.basename(page)
        if page.startswith("man/man3/") and not os.path.islink(os.path.join(ROOT, page)) and \
                f".BR {name[:-2]} (3)" not in index:
            failures.append(f"man/man7/tickloop.7: does not list {name[:-2]}(3) in its pages "
                            f"by subject")

    known_hit = set()
    for f in list(failures):
        m = re.match(r"^(tl_\w+): -(E[A-Z0-9]+) ", f)
        if m and (m.group(1), m.group(2)) in KNOWN:
            known_hit.add((m.group(1), m.group(2)))
            failures.remove(f)
            print(f"known: {f} ({KNOWN[(m.group(1), m.group(2))]})")
    for key in sorted(set(KNOWN) - known_hit):
        failures.append(f"{key[0]}: -{key[1]} now agrees between header and man page: remove "
                        f"its entry from KNOWN in .ci/check-man-errors.py")
    for f in failures:
        print(f)
    if failures:
        print(f"man/header errors: {len(failures)} problem(s); the header is the reference: fix "
              f"the man page, or the header if it is the one that is wrong")
        return 1
    print(f"man/header errors: {len(int_funcs)} functions returning int agree with their man "
          f"pages; {len(pages)} pages read with man -l from the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())

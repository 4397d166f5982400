#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The man pages: every public function (each TL_API declaration in the
# installed headers) has man/man3/<name>.3, each page renders with `man -l`
# without a warning and has RETURN VALUE and ERRORS sections, and each alias
# page is a symbolic link to a page in the same directory whose NAME section
# lists the alias (a link, not a .so request, so that `man -l` reads it from
# the source tree). With a prefix argument, also checks that `meson install`
# put them there and that man finds them by name.
#
#   bash .ci/check-man.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

for fn in $(grep -ho '^TL_API [^(]*(' include/tickloop/*.h | sed 's/($//; s/.*[ *]//' | sort -u); do
    [ -f "man/man3/$fn.3" ] || { echo "no man page for $fn: add man/man3/$fn.3"; fail=1; }
done

# Every page says the version of the header it documents (.TH's fourth field).
version=$(awk '$1 == "#define" && $2 ~ /^TL_VERSION_(MAJOR|MINOR|PATCH)$/ {v = v (v == "" ? "" : ".") $3}
               END {print v}' include/tickloop/tickloop.h)
for page in man/man3/*.3 man/man7/*.7; do
    [ -L "$page" ] && continue
    grep -q "^\.TH .* \"tickloop $version\"" "$page" ||
        { echo "$page: .TH does not say \"tickloop $version\" (the version in tickloop.h)"; fail=1; }
done

for page in man/man3/*.3 man/man7/*.7; do
    if [ -L "$page" ]; then
        target=$(readlink "$page")
        alias=$(basename "$page"); alias=${alias%.*}
        case $target in
        */*) echo "$page: links to $target; link to a page in the same directory"; fail=1 ;;
        *) if [ ! -f "$(dirname "$page")/$target" ] || [ -L "$(dirname "$page")/$target" ]; then
               echo "$page: links to $target, which is not a page"; fail=1
           elif ! sed -n '/^\.SH NAME/,/^\.SH/p' "$(dirname "$page")/$target" | grep -qw "$alias"; then
               echo "$page: $target does not name $alias in its NAME section"; fail=1
           fi ;;
        esac
        continue
    fi
    if grep -q '^\.so ' "$page"; then
        echo "$page: a .so request does not read with man -l from the tree; make it a symbolic link"
        fail=1
        continue
    fi
    warnings=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || { echo "$page: $warnings"; fail=1; }
    rendered=$(MANWIDTH=80 man -E UTF-8 -l "$page" 2>/dev/null)
    for section in NAME SYNOPSIS DESCRIPTION; do
        grep -q "^$section" <<<"$rendered" || { echo "$page: no $section section"; fail=1; }
    done
    case $page in
    *.3) for section in "RETURN VALUE" ERRORS; do
             grep -q "^$section" <<<"$rendered" || { echo "$page: no $section section"; fail=1; }
         done ;;
    esac
done

if [ -n "${1:-}" ]; then
    mandir="$1/share/man"
    for fn in tl_loop_new tl_loop_free tl_timer_start tl_async_send; do
        MANPATH="$mandir" man -w 3 "$fn" >/dev/null || { echo "$fn(3) not installed in $mandir"; fail=1; }
    done
    MANPATH="$mandir" MANWIDTH=80 man 3 tl_loop_free | grep -q 'RETURN VALUE' ||
        { echo "installed tl_loop_free(3) does not render"; fail=1; }
fi
[ "$fail" = 0 ] || exit 1
echo "man: $(ls man/man3 | wc -l) pages in man3 (every public function), $(ls man/man7 | wc -l) in man7, all render"

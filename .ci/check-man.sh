#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The man pages: every public function (each TL_API declaration in the
# installed headers) has man/man3/<name>.3, each page renders with `man -l`
# without a warning and has RETURN VALUE and ERRORS sections, and each alias
# page (.so) points to a page that exists. With a prefix argument, also checks
# that `meson install` put them there and that man finds them by name.
#
#   bash .ci/check-man.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

for fn in $(grep -ho '^TL_API [^(]*(' include/tickloop/*.h | sed 's/($//; s/.*[ *]//' | sort -u); do
    [ -f "man/man3/$fn.3" ] || { echo "no man page for $fn: add man/man3/$fn.3"; fail=1; }
done

for page in man/man3/*.3 man/man7/*.7; do
    if target=$(sed -n 's/^\.so //p' "$page") && [ -n "$target" ]; then
        [ -f "man/$target" ] || { echo "$page: .so $target does not exist"; fail=1; }
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

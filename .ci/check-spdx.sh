#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every source file (C, C++, headers, Meson, shell, Python, Valgrind
# suppressions) carries an SPDX-License-Identifier line in its first three
# lines. With --fix, adds `SPDX-License-Identifier: MIT` where it is missing
# (after a #! line), in the file's comment syntax.
#
#   bash .ci/check-spdx.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
fix=${1:-}

missing=0
while IFS= read -r f; do
    head -n 3 "$f" | grep -q 'SPDX-License-Identifier:' && continue
    if [ "$fix" != --fix ]; then
        echo "no SPDX-License-Identifier line: $f"
        missing=$((missing + 1))
        continue
    fi
    case $f in
    *.c | *.cc | *.cpp | *.h | *.hpp | *.in) line='/* SPDX-License-Identifier: MIT */' ;;
    *) line='# SPDX-License-Identifier: MIT' ;;
    esac
    if head -n 1 "$f" | grep -q '^#!'; then
        sed -i "1a $line" "$f"
    else
        sed -i "1i $line" "$f"
    fi
    echo "added: $f"
done < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.in' '*.sh' '*.py' \
    '*meson.build' '*meson_options.txt' '*.supp' '.ci/run' 'debian/rules')
if [ "$missing" -gt 0 ]; then
    echo "$missing file(s) lack an SPDX line: bash .ci/check-spdx.sh --fix adds one"
    exit 1
fi
echo "SPDX: every source file has its line"

"""Exact non-negative least squares for the kit's small fits (a handful of terms), the way
base/least_squares.h does it in the product: every subset of the columns solved by the normal
equations, the best one with no negative coefficient kept. Stdlib only; host_phases.py and
scripts/fit_kernel_bench.py use it."""
import math


def solve(ata, atb):
    """The normal equations ata . x = atb by Gaussian elimination with partial pivoting on a
    copy scaled to a unit diagonal; None when singular."""
    n = len(atb)
    scale = [math.sqrt(ata[i][i]) or 1.0 for i in range(n)]
    m = [[ata[i][j] / (scale[i] * scale[j]) for j in range(n)] + [atb[i] / scale[i]]
         for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-12:
            return None
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] / scale[i] for i in range(n)]


def nnls(a, b):
    """min sum((a_r . c - b_r)^2) over c >= 0: [coef per column] (all 0 when no subset of the
    columns has a non-negative solution)."""
    k = len(a[0])
    best, best_err = [0.0] * k, None
    for mask in range(1, 1 << k):
        cols = [j for j in range(k) if mask >> j & 1]
        sub = [[r[j] for j in cols] for r in a]
        ata = [[sum(row[i] * row[j] for row in sub) for j in range(len(cols))]
               for i in range(len(cols))]
        atb = [sum(row[i] * y for row, y in zip(sub, b)) for i in range(len(cols))]
        sol = solve(ata, atb)
        if sol is None or min(sol) < 0:
            continue
        coef = [0.0] * k
        for j, v in zip(cols, sol):
            coef[j] = v
        err = sum((sum(x * c for x, c in zip(r, coef)) - y) ** 2 for r, y in zip(a, b))
        if best_err is None or err < best_err:
            best, best_err = coef, err
    return best


def nnls_relative(rows, ys):
    """min sum(((x_r . c) - y_r) / y_r)^2 over c >= 0: each row's relative error."""
    return nnls([[x / y for x in r] for r, y in zip(rows, ys)], [1.0] * len(ys))

#include "base/least_squares.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace ddpscope {

std::vector<double> solveLinear(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  std::vector<double> scale(n);
  for (size_t i = 0; i < n; ++i) scale[i] = a[i][i] > 0 ? std::sqrt(a[i][i]) : 1.0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) a[i][j] /= scale[i] * scale[j];
    b[i] /= scale[i];
  }
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    if (std::abs(a[p][c]) < 1e-12) return {};
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t j = 0; j < n; ++j) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = b[i] / a[i][i] / scale[i];
  return x;
}

std::vector<double> nnlsRelative(const std::vector<std::vector<double>>& rows,
                                 const std::vector<double>& ys) {
  const size_t nf = rows.front().size();
  std::vector<double> best;
  double bestErr = 0;
  for (unsigned mask = 1; mask < (1u << nf); ++mask) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < nf; ++i) {
      if (mask >> i & 1u) idx.push_back(i);
    }
    std::vector<std::vector<double>> ata(idx.size(), std::vector<double>(idx.size(), 0.0));
    std::vector<double> atb(idx.size(), 0.0);
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t i = 0; i < idx.size(); ++i) {
        const double ai = rows[r][idx[i]] / ys[r];
        atb[i] += ai;
        for (size_t j = 0; j < idx.size(); ++j) ata[i][j] += ai * rows[r][idx[j]] / ys[r];
      }
    }
    const std::vector<double> sol = solveLinear(ata, atb);
    if (sol.empty() || *std::min_element(sol.begin(), sol.end()) < 0) continue;
    std::vector<double> coef(nf, 0.0);
    for (size_t i = 0; i < idx.size(); ++i) coef[idx[i]] = sol[i];
    double err = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      double p = 0;
      for (size_t i = 0; i < nf; ++i) p += coef[i] * rows[r][i];
      err += (p / ys[r] - 1.0) * (p / ys[r] - 1.0);
    }
    if (best.empty() || err < bestErr) {
      best = coef;
      bestErr = err;
    }
  }
  return best;
}

}  // namespace ddpscope

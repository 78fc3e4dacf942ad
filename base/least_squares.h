// Least squares: a linear solve and the non-negative least squares on relative errors that the
// kernel benchmark's formulas and the host fit's unprofiled terms are fitted by. No dependencies.
#pragma once

#include <vector>

namespace ddpscope {

// The solution x of a x = b (a square), by Gaussian elimination with partial pivoting on a
// diagonally scaled copy; empty when a is singular.
std::vector<double> solveLinear(std::vector<std::vector<double>> a, std::vector<double> b);

// The coefficients c ≥ 0 minimizing Σ_r ((rows[r] · c − ys[r]) / ys[r])², exactly: every subset
// of the columns solved by the normal equations, the best one with no negative coefficient kept
// (2^columns solves: for a few columns). Empty when no subset is solvable.
std::vector<double> nnlsRelative(const std::vector<std::vector<double>>& rows,
                                 const std::vector<double>& ys);

}  // namespace ddpscope

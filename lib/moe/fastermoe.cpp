#include "lib/moe/fastermoe.hpp"

#include <algorithm>
#include <numeric>

namespace skew::moe {

std::vector<int> choose_shadows(const std::vector<std::int64_t>& local, const std::vector<int>& owner, int ranks,
                                const ShadowCosts& costs) {
  const int E = static_cast<int>(owner.size());
  std::vector<double> global(static_cast<std::size_t>(E), 0.0);
  for (int r = 0; r < ranks; ++r)
    for (int e = 0; e < E; ++e)
      global[static_cast<std::size_t>(e)] += static_cast<double>(local[static_cast<std::size_t>(r * E + e)]);
  std::vector<char> shadowed(static_cast<std::size_t>(E), 0);
  int count = 0;
  auto predicted = [&]() {
    double worst = 0;
    for (int r = 0; r < ranks; ++r) {
      double work = 0, moved = 0;
      for (int e = 0; e < E; ++e) {
        const double mine = static_cast<double>(local[static_cast<std::size_t>(r * E + e)]);
        if (shadowed[static_cast<std::size_t>(e)])
          work += mine;
        else if (owner[static_cast<std::size_t>(e)] == r)
          work += global[static_cast<std::size_t>(e)];
        else
          moved += mine;
      }
      worst = std::max(worst, work * costs.sec_per_token + moved * costs.sec_per_row_moved);
    }
    return worst + count * costs.sec_per_shadow;
  };
  std::vector<int> hot(static_cast<std::size_t>(E));
  std::iota(hot.begin(), hot.end(), 0);
  std::stable_sort(hot.begin(), hot.end(), [&](int a, int b) {
    return global[static_cast<std::size_t>(a)] > global[static_cast<std::size_t>(b)];
  });
  double best = predicted();
  std::vector<int> out;
  for (int e : hot) {
    shadowed[static_cast<std::size_t>(e)] = 1, ++count;
    const double t = predicted();
    if (t >= best) break;
    best = t;
    out.push_back(e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace skew::moe

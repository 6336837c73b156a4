#include "lib/placement/trace.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/rng.hpp"
#include "lib/placement/cost_model.hpp"

namespace skew::placement {

TraceGenerator::TraceGenerator(const TraceSpec& spec) : spec_(spec), rng_(spec.seed, 0x7ace) {
  SKEW_CHECK(spec.iterations >= 1 && spec.layers >= 1 && spec.experts >= 1 && spec.assignments >= 0,
             "trace needs iterations, layers and experts >= 1");
  SKEW_CHECK(spec.zipf >= 0 && spec.drift >= 0 && spec.drift <= 1, "trace zipf must be >= 0 and drift in [0, 1]");
  const auto experts = static_cast<std::size_t>(spec.experts);
  weight_.resize(experts);
  for (std::size_t i = 0; i < experts; ++i) weight_[i] = std::pow(static_cast<double>(i + 1), -spec.zipf);
  total_weight_ = std::accumulate(weight_.begin(), weight_.end(), 0.0);
  // Layers start shuffled.
  order_.assign(static_cast<std::size_t>(spec.layers), std::vector<int>(experts));
  for (auto& o : order_) {
    std::iota(o.begin(), o.end(), 0);
    for (std::size_t i = experts; i-- > 1;) std::swap(o[i], o[rng_.below(i + 1)]);
  }
}

RoutingCounts TraceGenerator::next() {
  const std::size_t experts = weight_.size();
  RoutingCounts counts(order_.size(), std::vector<std::int64_t>(experts, 0));
  for (std::size_t l = 0; l < order_.size(); ++l) {
    auto& o = order_[l];
    if (generated_ > 0)
      for (std::size_t i = 0; i + 1 < experts; ++i)
        if (rng_.uniform() < spec_.drift) std::swap(o[i], o[i + 1]);
    for (std::size_t i = 0; i < experts; ++i) {
      const double expect = static_cast<double>(spec_.assignments) * weight_[i] / total_weight_;
      const double sample = expect + spec_.noise * std::sqrt(expect) * rng_.normal();
      counts[l][static_cast<std::size_t>(o[i])] = std::max<std::int64_t>(0, std::llround(sample));
    }
  }
  ++generated_;
  return counts;
}

TraceGenerator TraceGenerator::fork(std::uint64_t seed) const {
  TraceGenerator other = *this;
  other.rng_ = Rng(seed, 0xf0c7);  // a stream the trace's own (0x7ace) never uses
  return other;
}

RoutingTrace generate_trace(const TraceSpec& spec) {
  TraceGenerator generator(spec);
  RoutingTrace trace;
  for (int it = 0; it < spec.iterations; ++it) trace.push_back(generator.next());
  return trace;
}

FutureSampler trace_futures(const TraceSpec& spec, int count) {
  SKEW_CHECK(count >= 1, "trace futures: count must be >= 1, got " << count);
  auto states = std::make_shared<std::vector<TraceGenerator>>();
  TraceGenerator generator(spec);
  for (int it = 0; it < spec.iterations; ++it) {
    states->push_back(generator);
    generator.next();
  }
  return [states, count, seed = spec.seed](std::int64_t iteration, std::int64_t length) {
    SKEW_CHECK(iteration >= 0 && iteration < static_cast<std::int64_t>(states->size()) && length >= 0,
               "trace futures: iteration " << iteration << " outside the trace's " << states->size());
    std::vector<RoutingTrace> futures;
    for (int k = 0; k < count; ++k) {
      const std::uint64_t fork_seed = (seed * 1000003 + static_cast<std::uint64_t>(iteration)) * 1009 + k;
      TraceGenerator future = (*states)[static_cast<std::size_t>(iteration)].fork(fork_seed);
      RoutingTrace trace;
      for (std::int64_t i = 0; i < length; ++i) trace.push_back(future.next());
      futures.push_back(std::move(trace));
    }
    return futures;
  };
}

RoutingTrace read_trace_jsonl(const std::string& path, const std::string& key) {
  RoutingTrace trace;
  read_jsonl(path, "routing trace", [&](const Json& j, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) return;
    const auto& v = j.at(key);
    SKEW_CHECK(v.is_array() && !v.empty(), where << ": '" << key << "' must be a non-empty array");
    // Checked element by element: nlohmann's get<int64_t> of a float such as 1e300 is an
    // out-of-range conversion (undefined behaviour), not an exception.
    const auto layer = [&](const Json& a) {
      SKEW_CHECK(a.is_array() && !a.empty(),
                 where << ": '" << key << "' must hold a non-empty array of counts per layer");
      // A bound far above any real batch keeps every sum over a layer's experts (and the
      // simulator's products with bytes per token) inside int64.
      constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;
      std::vector<std::int64_t> out;
      for (const auto& c : a) {
        SKEW_CHECK(c.is_number_integer() && c.get<std::int64_t>() >= 0 && c.get<std::int64_t>() <= kMaxCount,
                   where << ": '" << key << "' must hold integer counts in [0, 2^40] per expert, got " << c.dump());
        out.push_back(c.get<std::int64_t>());
      }
      return out;
    };
    RoutingCounts counts;
    if (v.front().is_array())
      for (const auto& l : v) counts.push_back(layer(l));
    else
      counts.push_back(layer(v));
    for (const auto& l : counts)
      SKEW_CHECK(l.size() == counts.front().size(), where << ": '" << key << "' has layers of " << counts.front().size()
                                                          << " and " << l.size() << " experts");
    if (!trace.empty())
      SKEW_CHECK(counts.size() == trace.front().size() && counts.front().size() == trace.front().front().size(),
                 where << ": " << counts.size() << " layers x " << counts.front().size()
                       << " experts, earlier lines had " << trace.front().size() << " x "
                       << trace.front().front().size());
    trace.push_back(std::move(counts));
  });
  SKEW_CHECK(!trace.empty(), "routing trace " << path << " has no line with key '" << key << "'");
  return trace;
}

void check_trace_fits_ranks(const RoutingTrace& trace, const std::string& path, int world_size,
                            const std::string& ranks_key, const std::string& ranks_source) {
  // read_trace_jsonl makes every layer of every line as wide as the first one.
  const std::size_t experts = trace.empty() || trace.front().empty() ? 0 : trace.front().front().size();
  SKEW_CHECK(world_size >= 1 && experts % static_cast<std::size_t>(world_size) == 0,
             path << ": the trace has " << experts << " experts, not a multiple of the " << world_size
                  << " ranks of key '" << ranks_key << "' (" << ranks_source << ")");
}

double trace_balance_ratio(const RoutingTrace& trace, int world_size) {
  double sum = 0;
  std::int64_t n = 0;
  for (const auto& it : trace)
    for (const auto& layer : it) {
      SKEW_CHECK(world_size >= 1 && layer.size() % static_cast<std::size_t>(world_size) == 0,
                 "trace has " << layer.size() << " experts, not a multiple of " << world_size << " ranks");
      const int per_rank = static_cast<int>(layer.size()) / world_size;
      std::vector<double> loads(static_cast<std::size_t>(world_size), 0.0);
      for (std::size_t e = 0; e < layer.size(); ++e)
        loads[e / static_cast<std::size_t>(per_rank)] += static_cast<double>(layer[e]);
      sum += balance_ratio(loads);
      ++n;
    }
  return n ? sum / static_cast<double>(n) : 1.0;
}

}  // namespace skew::placement

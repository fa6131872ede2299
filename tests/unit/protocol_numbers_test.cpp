// Numbers as text in every locale, comma lists, and the run metrics every
// program derives from records (throughput after warm-up).
#include <gtest/gtest.h>

#include <clocale>
#include <string>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"
#include "flotilla/protocol/run_metrics.h"

namespace flotilla {
namespace {

// Switches the C library to a comma-decimal locale for one test, as Qt
// programs do when LC_ALL or LANG name one, and back afterwards.
class CommaDecimalLocale {
 public:
  CommaDecimalLocale() {
    previous_ = std::setlocale(LC_ALL, nullptr);
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"})
      if (std::setlocale(LC_ALL, name)) {
        active_ = name;
        break;
      }
  }
  ~CommaDecimalLocale() { std::setlocale(LC_ALL, previous_.c_str()); }
  bool active() const { return !active_.empty(); }

 private:
  std::string previous_, active_;
};

#define REQUIRE_COMMA_LOCALE(locale)                                                     \
  if (!(locale).active())                                                                \
  GTEST_SKIP() << "no comma-decimal locale on this machine (scripts/setup.sh generates " \
                  "de_DE.UTF-8)"

TEST(CommaDecimalLocale, ConfigNumbersParseAsWritten) {
  CommaDecimalLocale locale;
  REQUIRE_COMMA_LOCALE(locale);
  const auto config = parse_experiment(
      "name: locale\noptimizer: {lr: 0.05, momentum: 0.9, weight_decay: 5e-4}\n"
      "dropout: 0.1\nbucket_mb: 2.5\nfreeze: {alpha: 0.25, tolerance: +0.2}\n");
  EXPECT_DOUBLE_EQ(config.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(config.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(config.optimizer.weight_decay, 5e-4);
  EXPECT_DOUBLE_EQ(config.dropout, 0.1);
  EXPECT_DOUBLE_EQ(config.bucket_mb, 2.5);
  EXPECT_DOUBLE_EQ(config.freeze.alpha, 0.25);
  EXPECT_DOUBLE_EQ(config.freeze.tolerance, 0.2);
}

TEST(CommaDecimalLocale, ConfigsWriteAndReadBackWithAPoint) {
  CommaDecimalLocale locale;
  REQUIRE_COMMA_LOCALE(locale);
  ExperimentConfig config;
  config.optimizer.lr = 0.05;
  config.bucket_mb = 12.5;
  const std::string yaml = to_yaml(config);
  EXPECT_NE(yaml.find("lr: 0.05"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("0,05"), std::string::npos) << yaml;
  EXPECT_DOUBLE_EQ(parse_experiment(yaml).optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(parse_experiment(to_json(config)).bucket_mb, 12.5);
}

TEST(CommaDecimalLocale, NumbersFormatAndParseWithAPoint) {
  CommaDecimalLocale locale;
  REQUIRE_COMMA_LOCALE(locale);
  EXPECT_EQ(format_number(0.5), "0.5");
  EXPECT_EQ(format_fixed(2.0 / 3.0, 3), "0.667");
  EXPECT_EQ(parse_number("0.05"), 0.05);
  EXPECT_EQ(parse_number("0,05"), std::nullopt);
}

TEST(Numbers, ShortestRoundTrip) {
  for (double v : {0.0, 1.0, 0.1, 1e-5, 123456.789, -2.5, 1.0 / 3.0})
    EXPECT_EQ(parse_number(format_number(v)), v) << format_number(v);
  EXPECT_EQ(format_number(3), "3");
  EXPECT_EQ(format_fixed(1.25, 1), "1.2");  // round half to even, as printf does
  EXPECT_EQ(format_fixed(1048576.0 / 3, 0), "349525");
}

TEST(Numbers, ParseTakesTheWholeTextOrNothing) {
  EXPECT_EQ(parse_number("+1.5"), 1.5);
  EXPECT_EQ(parse_number("-0.25"), -0.25);
  EXPECT_EQ(parse_number(".5"), 0.5);
  EXPECT_EQ(parse_number("1e3"), 1000.0);
  for (const char* bad : {"", "+", "++1", "1.5x", " 1", "nan", "inf", "1e999", "0x10"})
    EXPECT_EQ(parse_number(bad), std::nullopt) << '"' << bad << '"';
}

TEST(SplitList, TrimsEntriesAndDropsEmptyOnes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_list("a, b,,c "), (V{"a", "b", "c"}));
  EXPECT_EQ(split_list(" local"), (V{"local"}));
  EXPECT_EQ(split_list("\tn1 ,\n n2"), (V{"n1", "n2"}));
  EXPECT_EQ(split_list(""), V{});
  EXPECT_EQ(split_list(" , ,"), V{});
  EXPECT_EQ(join_list(V{"a", "b"}), "a,b");
}

TEST(RunMetrics, WarmUpIsTheFirstTenthAtLeastFiveButNeverEveryStep) {
  EXPECT_EQ(metrics::warmup_steps(0), 0);
  EXPECT_EQ(metrics::warmup_steps(1), 0);
  EXPECT_EQ(metrics::warmup_steps(3), 2);
  EXPECT_EQ(metrics::warmup_steps(6), 5);
  EXPECT_EQ(metrics::warmup_steps(50), 5);
  EXPECT_EQ(metrics::warmup_steps(51), 6);  // 10 % rounded up
  EXPECT_EQ(metrics::warmup_steps(1000), 100);
}

TEST(RunMetrics, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(metrics::median({}), std::nullopt);
  EXPECT_EQ(metrics::median({3.0}), 3.0);
  EXPECT_EQ(metrics::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(metrics::median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

TEST(RunMetrics, ThroughputIsTheWorkAfterWarmUpOverItsWallTime) {
  // Ten slow warm-up steps of 100 samples at 50 samples/s, then 90 steps of
  // 100 samples at 1000 samples/s but for one stall of 10 s: 9000 samples in
  // 89 x 0.1 s + 10 s. A median of the rates would say 1000 and hide the stall.
  std::vector<metrics::StepWork> steps(10, {100, 50});
  for (int i = 0; i < 90; ++i) steps.push_back({100, i == 40 ? 10.0 : 1000.0});
  const double stalled = 9000.0 / (89 * 0.1 + 10.0);  // 476.19: summed in any order
  EXPECT_NEAR(*metrics::throughput(steps), stalled, 1e-9 * stalled);
  // A fixed amount of work W takes W / throughput: two runs' T(1)/T(N) is the
  // ratio of their throughputs, whatever their step sizes.
  std::vector<metrics::StepWork> halves(20, {50, 500});
  for (int i = 0; i < 180; ++i) halves.push_back({50, i % 2 ? 2000.0 : 1000.0});
  const double mixed = 9000.0 / (90 * 0.05 + 90 * 0.025);
  EXPECT_NEAR(*metrics::throughput(halves), mixed, 1e-9 * mixed);
  EXPECT_EQ(metrics::throughput({}), std::nullopt);
  EXPECT_EQ(metrics::throughput({{7, 7}}), 7.0);
  // A step without a rate (or samples) counts in neither sum.
  std::vector<metrics::StepWork> gaps(5, {10, 1});
  gaps.insert(gaps.end(), {{0, 0}, {10, 0}, {10, 10}, {10, 10}});
  EXPECT_EQ(metrics::throughput(gaps), 10.0);
}

}  // namespace
}  // namespace flotilla

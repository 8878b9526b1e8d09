// StepTimeModel against simulated CPUs: a step's time is decode_s + rows * row_s (+ depth), and
// the model must size prompt chunks so that steps beside streams stay under the limit on a fast
// and a slow machine alike, from the first step on, while giving the prompt most of the room.
#include "runtime/step_time_model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ponder {
namespace {

struct SimulatedCpu {
  double decode_s;       // a step of decode rows only (the weights streamed once)
  double row_s;          // what one prompt row adds at depth 0
  double row_s_per_pos;  // what it adds per position of depth (attention)
  double step(int32_t n_decode, int32_t n_prompt, int32_t depth) const {
    return (n_decode > 0 ? decode_s : 0.0) + n_prompt * (row_s + row_s_per_pos * depth);
  }
};

// Streams decode; a prompt of n_prompt rows arrives. Returns the longest step beside the streams
// and the prompt's rate (rows per second) as a share of the rate it gets alone in 512-row chunks.
struct LateRun {
  double worst_step_s = 0;
  int32_t steps = 0;
};

LateRun late_prompt(StepTimeModel& m, const SimulatedCpu& cpu, int32_t n_prompt, double limit) {
  LateRun run;
  for (int i = 0; i < 5; ++i) m.observe(3, 0, cpu.step(3, 0, 0));  // streams decoding
  int32_t done = 0;
  while (done < n_prompt) {
    const int32_t rows = std::min(m.prompt_rows(3, limit, 512), n_prompt - done);
    const double t = cpu.step(3, rows, done);
    m.observe(3, rows, t);
    run.worst_step_s = std::max(run.worst_step_s, t);
    done += rows;
    run.steps++;
  }
  return run;
}

TEST(StepTimeModelTest, NobodyWaitingTakesTheWholeBatch) {
  StepTimeModel m;
  EXPECT_EQ(m.prompt_rows(0, 0.25, 512), 512);
  m.observe(0, 512, 3.0);
  EXPECT_EQ(m.prompt_rows(0, 0.25, 512), 512);
}

TEST(StepTimeModelTest, FirstChunkBesideStreamsIsAProbe) {
  StepTimeModel m;
  m.observe(2, 0, 0.05);
  EXPECT_EQ(m.prompt_rows(2, 0.25, 512), StepTimeModel::kProbeRows);
}

TEST(StepTimeModelTest, SlowCpuNeverStallsStreamsPastTheLimit) {
  // Issue 32's machine: a Zen 1 at ~20 prompt rows/s, ~100 ms a decode step (2 threads, 1.5B).
  const SimulatedCpu zen1{0.100, 0.045, 0.000004};
  StepTimeModel m;
  m.observe(0, 512, zen1.step(0, 512, 0));  // an earlier prompt, alone
  const LateRun run = late_prompt(m, zen1, 2000, 0.25);
  EXPECT_LE(run.worst_step_s, 0.25);
  EXPECT_GT(run.steps, 0);
}

TEST(StepTimeModelTest, FastCpuGivesThePromptMostOfTheStep) {
  const SimulatedCpu zen4{0.030, 0.004, 0.0000005};
  StepTimeModel m;
  const LateRun run = late_prompt(m, zen4, 2000, 0.25);
  EXPECT_LE(run.worst_step_s, 0.25);
  // The chunks grow to fill the room: 2000 rows in few steps, each well above the old floor.
  const double room_rows = (StepTimeModel::kPlannedShare * 0.25 - zen4.decode_s) / zen4.row_s;
  EXPECT_LT(run.steps, 2000 / (0.7 * room_rows) + 6);
}

TEST(StepTimeModelTest, ChunksFollowTheCostAsItGrowsWithDepth) {
  // Row cost triples over the prompt (a long context's attention): the limit still holds.
  const SimulatedCpu deep{0.040, 0.010, 0.00001};
  StepTimeModel m;
  m.observe(0, 512, deep.step(0, 512, 0));
  const LateRun run = late_prompt(m, deep, 4000, 0.25);
  EXPECT_LE(run.worst_step_s, 0.25);
}

TEST(StepTimeModelTest, AStaleFixedPartIsUnlearnedFromMixedSteps) {
  // The first decode steps after a load are slow (163 ms measured on Zen 4, then 43 ms): steps with
  // decode and prompt rows together must correct the fixed part, or the row cost learned beside it
  // is wrong (too small: the chunks then overshoot the limit once the fixed part is corrected).
  const SimulatedCpu cpu{0.043, 0.008, 0.0};
  StepTimeModel m;
  m.observe(0, 384, cpu.step(0, 384, 0));
  m.observe(1, 0, 0.164);
  int32_t last = 0;
  double worst = 0;
  for (int i = 0; i < 60; ++i) {
    last = m.prompt_rows(1, 0.25, 512);
    const double t = cpu.step(1, last, 0);
    worst = std::max(worst, t);
    m.observe(1, last, t);
  }
  EXPECT_LE(worst, 0.25);
  EXPECT_NEAR(m.decode_step_s(), cpu.decode_s, 0.01);
  const double room_rows = (StepTimeModel::kPlannedShare * 0.25 - cpu.decode_s) / cpu.row_s;
  EXPECT_GE(last, static_cast<int32_t>(0.85 * room_rows));
}

TEST(StepTimeModelTest, ADecodeStepOverTheLimitLeavesOneRow) {
  StepTimeModel m;
  m.observe(4, 0, 0.4);  // a big model: decoding alone takes longer than the limit
  m.observe(4, 8, 0.8);
  EXPECT_EQ(m.prompt_rows(4, 0.25, 512), 1);
}

// Speculative decoding's guess rows: a few rows beside the decode rows cost less than a row of a
// big prompt chunk (here 12 ms against 30 ms), and the draft length is chosen by their own cost.
TEST(StepTimeModelTest, GuessRowsAreMeasuredOnTheirOwn) {
  StepTimeModel m;
  m.observe(0, 512, 512 * 0.030);                      // a prompt alone
  for (int i = 0; i < 3; ++i) m.observe(1, 0, 0.100);  // then its stream decodes
  EXPECT_LT(m.guess_row_s(), 0);
  EXPECT_FALSE(m.wants_plain_step());
  for (int i = 0; i < 10; ++i) m.observe(1, 0, 0.100 + 3 * 0.012, 3);
  EXPECT_NEAR(m.guess_row_s(), 0.012, 1e-9);
  EXPECT_NEAR(m.prompt_row_s(), 0.030, 1e-9);  // guess steps leave the prompt rows' cost alone
  EXPECT_NEAR(m.decode_step_s(), 0.100, 1e-9);
  // A sequence that always drafts gets a plain step now and then, to keep the fixed part true.
  for (int i = 10; i < StepTimeModel::kPlainEvery; ++i) m.observe(1, 0, 0.100 + 3 * 0.012, 3);
  EXPECT_TRUE(m.wants_plain_step());
  m.observe(1, 0, 0.100);
  EXPECT_FALSE(m.wants_plain_step());
}

// A big model's guess rows add little to a step whose time the host moves by more (the 14B:
// ~8 ms a guess row against a ~150 ms step drifting by 10-20%): guess steps that come out under
// the decode time are noise, and ask for no plain step before kPlainEvery.
TEST(StepTimeModelTest, NoisyGuessStepsDoNotAskForPlainSteps) {
  StepTimeModel m;
  m.observe(1, 0, 0.150);
  const double noise[] = {-0.02, 0.015, -0.01, 0.02, -0.015, 0.0};
  int plain = 0;
  for (int i = 0; i < 4 * StepTimeModel::kPlainEvery; ++i) {
    if (m.wants_plain_step()) {
      ++plain;
      m.observe(1, 0, 0.150 + noise[i % 6]);
    } else {
      m.observe(1, 0, 0.150 + 3 * 0.008 + noise[i % 6], 3);
    }
  }
  EXPECT_LE(plain, 4);
  EXPECT_GT(m.guess_row_s(), 0.0);
  EXPECT_LT(m.guess_row_s(), 0.02);
}

TEST(StepTimeModelTest, AStaleDecodeTimeAsksForAPlainStep) {
  // The first decode step after a load is slow (Zen 4: 163 ms against 43 ms later); the guess
  // steps that follow take less than it, which no guess cost explains.
  StepTimeModel m;
  m.observe(1, 0, 0.163);
  m.observe(1, 0, 0.043 + 2 * 0.010, 2);
  EXPECT_LT(m.guess_row_s(), 0);  // not taken as a guess row costing nothing
  EXPECT_TRUE(m.wants_plain_step());
  // Plain steps bring the decode time down; guess steps between them then measure their rows.
  for (int i = 0; i < 40; ++i) {
    if (m.wants_plain_step()) {
      m.observe(1, 0, 0.043);
    } else {
      m.observe(1, 0, 0.043 + 2 * 0.010, 2);
    }
  }
  EXPECT_NEAR(m.decode_step_s(), 0.043, 0.003);
  EXPECT_NEAR(m.guess_row_s(), 0.010, 0.003);
}

}  // namespace
}  // namespace ponder

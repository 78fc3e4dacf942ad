// ddpscope-run --backend nccl / --dtype end to end under mpirun (label mpi): on a machine
// without a GPU the worker must refuse cleanly (exit 2, the reason); the CPU backend refuses
// tf32 / bf16, naming the flag.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct CommandRun {
  int exitCode = -1;
  std::string output;
};

CommandRun runCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe)) run.output += buffer.data();
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string worker(const std::string& args) {
  return std::string(DDPSCOPE_MPIEXEC) + " -np 1 --oversubscribe --bind-to none " +
         DDPSCOPE_WORKER + " " + args;
}

TEST(NcclCliTest, CpuBackendRefusesReducedPrecisionNamingTheFlag) {
  const CommandRun run = runCommand(worker("--model mlp-tiny --dtype bf16"));
  EXPECT_EQ(run.exitCode, 2) << run.output;
  EXPECT_NE(run.output.find("--dtype bf16: the CPU model (--backend mpi) computes in fp32 only"),
            std::string::npos)
      << run.output;
  const CommandRun bad = runCommand(worker("--model mlp-tiny --dtype fp8"));
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("--dtype: expected fp32, tf32 or bf16, got 'fp8'"), std::string::npos)
      << bad.output;
}

TEST(NcclCliTest, NcclBackendWithoutAGpuExitsTwoWithTheReason) {
  const CommandRun run = runCommand(worker("--model mlp-tiny --backend nccl --iterations 2"));
#if DDPSCOPE_WORKER_HAS_NCCL
  if (run.exitCode == 0) GTEST_SKIP() << "a CUDA device is visible: the run succeeded";
  EXPECT_EQ(run.exitCode, 2) << run.output;
  EXPECT_NE(run.output.find("--backend nccl: no CUDA device visible ("), std::string::npos)
      << run.output;
#else
  EXPECT_NE(run.exitCode, 0) << run.output;
  EXPECT_NE(run.output.find("--backend nccl: this ddpscope-run was not built with CUDA/NCCL"),
            std::string::npos)
      << run.output;
#endif
}

}  // namespace

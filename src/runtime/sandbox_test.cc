// Unit tests of the sandbox's pure parts: the seccomp program, the system-folder rule, and the sandbox
// record in spec.json. The sandbox itself is tested with real Pods in test/security/local_sandbox_test.cc.
#include "runtime/sandbox.h"

#include <gtest/gtest.h>
#include <linux/filter.h>

#include "runtime/pod_files.h"

namespace falcon::runtime::local {
namespace {

TEST(SandboxTest, TheSeccompFilterCompilesToABpfProgram) {
  auto bpf = CompileSeccompFilter();
  ASSERT_TRUE(bpf.ok()) << bpf.status();
  EXPECT_EQ(bpf->size() % sizeof(sock_filter), 0u);
  // A few dozen denied calls: clearly more than an allow-all program.
  EXPECT_GT(bpf->size() / sizeof(sock_filter), 40u);
}

TEST(SandboxTest, SystemFoldersAreMatchedByWholeSegments) {
  EXPECT_TRUE(UnderSystemFolder("/etc"));
  EXPECT_TRUE(UnderSystemFolder("/etc/shadow"));
  EXPECT_TRUE(UnderSystemFolder("/usr/lib/x"));
  EXPECT_FALSE(UnderSystemFolder("/etcetera/x"));
  EXPECT_FALSE(UnderSystemFolder("/usrdata"));
  EXPECT_FALSE(UnderSystemFolder("/home/u/x"));
  EXPECT_FALSE(UnderSystemFolder("/"));
}

TEST(SandboxTest, TheSandboxRecordSurvivesSpecJson) {
  LaunchSpec ls;
  ls.name = "p";
  ls.argv = {"/bin/falcon-runner"};
  ls.work_dir = "/s/pods/p/work";
  SandboxSpec& s = ls.sandbox;
  s.enabled = true;
  s.bwrap = "/usr/bin/bwrap";
  s.init = "/bin/falcon-localpod";
  s.uid = 1234;
  s.gid = 5678;
  s.share_net = true;
  s.binds = {{"/s/pods/p/work", true, true}, {"/data/in", false, false}};
  s.owned_dirs = {"/s/pods/p/work"};
  s.cgroup_parent = "/sys/fs/cgroup/x";
  s.limits = {1 << 30, 500, 60, 64, 1 << 20, 256};
  auto back = DecodeLaunchSpec(EncodeLaunchSpec(ls));
  ASSERT_TRUE(back.ok()) << back.status();
  const SandboxSpec& b = back->sandbox;
  EXPECT_TRUE(b.enabled);
  EXPECT_EQ(b.bwrap, s.bwrap);
  EXPECT_EQ(b.init, s.init);
  EXPECT_EQ(b.uid, 1234u);
  EXPECT_EQ(b.gid, 5678u);
  EXPECT_TRUE(b.share_net);
  ASSERT_EQ(b.binds.size(), 2u);
  EXPECT_EQ(b.binds[0].path, "/s/pods/p/work");
  EXPECT_TRUE(b.binds[0].writable);
  EXPECT_FALSE(b.binds[1].writable);
  EXPECT_FALSE(b.binds[1].by_supervisor);
  EXPECT_EQ(b.owned_dirs, s.owned_dirs);
  EXPECT_EQ(b.cgroup_parent, s.cgroup_parent);
  EXPECT_EQ(b.limits.memory_bytes, 1 << 30);
  EXPECT_EQ(b.limits.cpu_millis, 500);
  EXPECT_EQ(b.limits.cpu_seconds, 60);
  EXPECT_EQ(b.limits.pids, 64);
  EXPECT_EQ(b.limits.file_size_bytes, 1 << 20);
  EXPECT_EQ(b.limits.open_files, 256);
  // A spec without a sandbox (older records, non-runner Pods) decodes as "not sandboxed".
  LaunchSpec plain = ls;
  plain.sandbox = {};
  auto p = DecodeLaunchSpec(EncodeLaunchSpec(plain));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->sandbox.enabled);
}

}  // namespace
}  // namespace falcon::runtime::local

// doctest runner for the unit tests (no root, no kernel).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <glog/logging.h>

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = false;
  FLAGS_minloglevel = 3;  // the code under test logs on purpose; keep the test output readable
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

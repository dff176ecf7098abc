#include "nft/worker_thread.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>

using kpn::nft::WorkerThread;

TEST_CASE("worker thread: runs each task on its own thread and hands back results and exceptions") {
  WorkerThread worker;
  auto caller = std::this_thread::get_id();
  auto first = worker.call([] { return std::this_thread::get_id(); });
  auto second = worker.call([] { return std::this_thread::get_id(); });
  CHECK((first != caller));
  CHECK((first == second));  // one long-lived thread, so one malloc arena
  CHECK(worker.call([] { return 6 * 7; }) == 42);
  CHECK_THROWS_AS(worker.call([]() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
  CHECK(worker.call([] { return 1; }) == 1);  // still serving after an exception
}

#include "cli/forget_command.h"

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "pod_capture/agent_connection.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tls/credentials.h"

namespace podscope::cli {

void add_forget_flags(CLI::App& command, ForgetFlags& flags) {
  command.add_option("--coordinator", flags.coordinator, "The podscope-coordinator host:port")->required();
  command.add_option("host_name", flags.host_name, "The registered worker whose name to free")->required();
  tls::add_tls_flags(command, flags.tls);
}

int run_forget_command(const ForgetFlags& flags) {
  absl::Status bad = tls::check_tls_config(flags.tls);
  if (bad.ok()) bad = tls::check_tls_files(flags.tls);
  if (!bad.ok()) {
    std::cerr << "podscope forget: " << bad.message() << "\n";
    return 2;
  }
  const std::string address = pod_capture::strip_grpc_scheme(flags.coordinator);
  auto stub = podscope::v1::Coordinator::NewStub(grpc::CreateChannel(address, tls::channel_credentials(flags.tls)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  podscope::v1::ForgetWorkerRequest request;
  request.set_host_name(flags.host_name);
  podscope::v1::ForgetWorkerResponse response;
  const grpc::Status rpc = stub->ForgetWorker(&context, request, &response);
  if (!rpc.ok()) {
    std::cerr << "podscope forget: " << address << ": " << rpc.error_message() << "\n";
    return 1;
  }
  std::cout << "worker " << flags.host_name << " (registered by " << response.owner() << ") forgotten: its name is "
            << "free\n";
  return 0;
}

}  // namespace podscope::cli

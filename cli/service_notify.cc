#include "cli/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace verdict::cli {

Status NotifyServiceReady() {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || socket_path[0] == '\0') return Status::Ok();
  const std::string path(socket_path);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path) || (path[0] != '/' && path[0] != '@')) {
    return InvalidArgumentError("NOTIFY_SOCKET is no Unix socket path: " + path);
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  if (path[0] == '@') address.sun_path[0] = '\0';  // an abstract socket
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  constexpr char kReady[] = "READY=1";
  const ssize_t sent = ::sendto(fd, kReady, sizeof(kReady) - 1, MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  ::close(fd);
  if (sent < 0) {
    return UnavailableError("cannot tell " + path +
                            " the program is ready: " + std::strerror(error));
  }
  return Status::Ok();
}

}  // namespace verdict::cli

// Parsing of "HOST:PORT" listen addresses (IPv6 as "[::1]:8080"), shared by every binary's
// flags. Stateless.
#pragma once

#include <cstdint>
#include <string>

namespace verdict {

// Splits "HOST:PORT" into its parts. False if it is malformed or the port is over 65535.
bool ParseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace verdict

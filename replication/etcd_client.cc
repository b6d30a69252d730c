#include "replication/etcd_client.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "common/host_port.h"
#include "delivery/http_client.h"
#include "etcd_gateway.pb.h"
#include "proto/wire.h"

namespace verdict::replication {
namespace {

// gRPC status codes, as the gateway's error bodies carry them.
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;
// A create-if-absent transaction that found some keys present is sent again for the absent ones;
// a key that keeps appearing and vanishing between two of them (another writer deleting it)
// makes the call give up after this many rounds, as UNAVAILABLE.
constexpr int kCreateRounds = 4;

bool ParseJson(const std::string& body, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // etcd's answers carry more than verdict declares
  return google::protobuf::util::JsonStringToMessage(body, message, options).ok();
}

// What an answer other than 200 means: the error class, and whether another endpoint may do
// better.
struct Refusal {
  Status status;
  bool try_next_endpoint = false;
  bool token_expired = false;
};

Refusal RefusalOf(const delivery::HttpResponse& res, const std::string& path) {
  etcd::GatewayError error;
  if (!ParseJson(res.body, &error) || error.code() == 0) {
    // Not etcd's gateway speaking (a proxy's page), or an answer without a code.
    Status s = UnavailableError("etcd " + path + " answered HTTP " + std::to_string(res.status));
    return {s, res.status >= 500};
  }
  const std::string what = "etcd " + path + ": " + error.error();
  switch (error.code()) {
    case kGrpcUnavailable:
    case kGrpcDeadlineExceeded:
      return {UnavailableError(what), true};
    case kGrpcUnauthenticated:
      return {UnavailableError(what), false, true};
    case kGrpcResourceExhausted:
      // NOSPACE ("mvcc: database space exceeded") stays until an operator acts; "too many
      // requests" passes.
      if (error.error().find("space exceeded") != std::string::npos) {
        return {ResourceExhaustedError(what)};
      }
      return {UnavailableError(what), true};
    case kGrpcInvalidArgument:
      return {InvalidArgumentError(what)};
    default:
      return {InternalError(what)};
  }
}

}  // namespace

struct EtcdClient::State {
  EtcdOptions options;
  std::vector<HttpUrl> urls;
  size_t current = 0;  // the endpoint that answered last
  std::unique_ptr<delivery::BlockingHttpClient> http;
  std::string token;  // from /v3/auth/authenticate; empty until then

  // Posts `request` to `path` and parses the answer into `response`, moving to the next
  // endpoint on a failure that another one may not have.
  Status Call(const std::string& path, const google::protobuf::Message& request,
              google::protobuf::Message* response);
  // One attempt at the current endpoint.
  Refusal CallOnce(const std::string& path, const std::string& body,
                   google::protobuf::Message* response);
  Refusal Authenticate();
};

Refusal EtcdClient::State::CallOnce(const std::string& path, const std::string& body,
                                    google::protobuf::Message* response) {
  delivery::HttpRequest req;
  req.target = path;
  req.authorization = token;
  req.content_type = "application/json";
  req.body = body;
  delivery::HttpOutcome outcome = http->Post(urls[current], std::move(req));
  if (const auto* error = std::get_if<delivery::HttpError>(&outcome)) {
    return {UnavailableError("etcd at " + JoinHostPort(urls[current].host, urls[current].port) +
                             ": " + error->message),
            true};
  }
  const auto& res = std::get<delivery::HttpResponse>(outcome);
  if (res.status != 200) return RefusalOf(res, path);
  if (!ParseJson(res.body, response)) {
    return {InternalError("etcd " + path + " answered 200 with a body that is not its JSON")};
  }
  return {Status::Ok()};
}

Refusal EtcdClient::State::Authenticate() {
  etcd::AuthenticateRequest request;
  request.set_name(options.user);
  request.set_password(options.password);
  auto body = wire::ToJson(request);
  if (!body.ok()) return {body.status()};
  token.clear();
  etcd::AuthenticateResponse response;
  Refusal r = CallOnce("/v3/auth/authenticate", *body, &response);
  if (r.status.ok()) token = response.token();
  return r;
}

Status EtcdClient::State::Call(const std::string& path, const google::protobuf::Message& request,
                               google::protobuf::Message* response) {
  auto body = wire::ToJson(request);
  if (!body.ok()) return body.status();
  Status last;
  bool reauthenticated = false;
  for (size_t tried = 0; tried < urls.size();) {
    Refusal r;
    if (!options.user.empty() && token.empty()) r = Authenticate();
    if (r.status.ok()) r = CallOnce(path, *body, response);
    if (r.status.ok()) return r.status;
    last = r.status;
    if (r.token_expired && !options.user.empty() && !reauthenticated) {
      reauthenticated = true;  // simple tokens expire after 5 minutes idle: get a new one once
      token.clear();
      continue;
    }
    if (!r.try_next_endpoint) return last;
    current = (current + 1) % urls.size();
    ++tried;
  }
  return last;
}

EtcdClient::EtcdClient(std::unique_ptr<State> state) : state_(std::move(state)) {}
EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(const EtcdOptions& options) {
  if (options.endpoints.empty()) return InvalidArgumentError("no etcd endpoint given");
  auto state = std::make_unique<State>();
  state->options = options;
  const bool tls = options.tls || !options.ca_file.empty() || !options.cert_file.empty();
  for (const std::string& endpoint : options.endpoints) {
    HttpUrl url;
    if (!ParseHostPort(endpoint, &url.host, &url.port) || url.port == 0) {
      return InvalidArgumentError("etcd endpoint '" + endpoint + "' is not HOST:PORT");
    }
    url.tls = tls;
    state->urls.push_back(url);
  }
  if (!options.cert_file.empty() && options.key_file.empty()) {
    return InvalidArgumentError("an etcd client certificate needs its key file");
  }
  delivery::HttpConnectionOptions http;
  http.timeout = options.timeout;
  http.user_agent = "verdict-replication";
  if (tls) {
    auto trust = delivery::LoadTlsTrust(options.ca_file, options.cert_file, options.key_file);
    if (!trust.ok()) return trust.status();
    http.tls = *trust;
  }
  state->http = std::make_unique<delivery::BlockingHttpClient>(http);
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(state)));
}

Result<std::vector<CreateOutcome>> EtcdClient::CreateIfAbsent(std::span<const KeyValue> kvs) {
  std::vector<CreateOutcome> outcomes(kvs.size(), CreateOutcome::kCreated);
  std::vector<size_t> todo(kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) todo[i] = i;
  for (int round = 0; round < kCreateRounds && !todo.empty(); ++round) {
    // Every key absent: put them all. Otherwise read them all back, to see which are there.
    etcd::TxnRequest txn;
    for (size_t i : todo) {
      etcd::Compare* c = txn.add_compare();
      c->set_key(kvs[i].key);
      c->set_target(etcd::Compare::CREATE);
      c->set_result(etcd::Compare::EQUAL);
      c->set_create_revision(0);
      etcd::PutRequest* put = txn.add_success()->mutable_request_put();
      put->set_key(kvs[i].key);
      put->set_value(kvs[i].value);
      txn.add_failure()->mutable_request_range()->set_key(kvs[i].key);
    }
    etcd::TxnResponse response;
    VERDICT_RETURN_IF_ERROR(state_->Call("/v3/kv/txn", txn, &response));
    if (response.succeeded()) return outcomes;
    if (static_cast<size_t>(response.responses_size()) != todo.size()) {
      return InternalError("etcd answered a transaction with the wrong number of responses");
    }
    std::vector<size_t> absent;
    for (size_t j = 0; j < todo.size(); ++j) {
      const size_t i = todo[j];
      const etcd::RangeResponse& range = response.responses(j).response_range();
      if (range.kvs_size() == 0) {
        absent.push_back(i);
      } else {
        outcomes[i] = range.kvs(0).value() == kvs[i].value ? CreateOutcome::kPresent
                                                           : CreateOutcome::kConflict;
      }
    }
    todo = std::move(absent);
  }
  if (!todo.empty()) return UnavailableError("etcd keys kept changing during a create");
  return outcomes;
}

Status EtcdClient::Delete(std::span<const std::string> keys) {
  if (keys.empty()) return Status::Ok();
  etcd::TxnRequest txn;
  for (const std::string& key : keys) {
    txn.add_success()->mutable_request_delete_range()->set_key(key);
  }
  etcd::TxnResponse response;
  return state_->Call("/v3/kv/txn", txn, &response);
}

Result<RangePage> EtcdClient::Range(const std::string& from, const std::string& end, int64_t limit,
                                    bool keys_only) {
  etcd::RangeRequest request;
  request.set_key(from);
  request.set_range_end(end);
  request.set_limit(limit);
  request.set_keys_only(keys_only);
  etcd::RangeResponse response;
  VERDICT_RETURN_IF_ERROR(state_->Call("/v3/kv/range", request, &response));
  RangePage page;
  page.more = response.more();
  for (const etcd::KeyValue& kv : response.kvs()) {
    page.kvs.push_back({kv.key(), kv.value(), kv.mod_revision()});
  }
  return page;
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_s) {
  etcd::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  etcd::LeaseGrantResponse response;
  VERDICT_RETURN_IF_ERROR(state_->Call("/v3/lease/grant", request, &response));
  if (!response.error().empty()) return UnavailableError("etcd lease grant: " + response.error());
  return response.id();
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease_id) {
  etcd::LeaseKeepAliveRequest request;
  request.set_id(lease_id);
  etcd::LeaseKeepAliveStreamItem response;
  VERDICT_RETURN_IF_ERROR(state_->Call("/v3/lease/keepalive", request, &response));
  return response.result().ttl();
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease_id) {
  etcd::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease_id);
  etcd::PutResponse response;
  return state_->Call("/v3/kv/put", request, &response);
}

Result<bool> EtcdClient::NoSpaceAlarmRaised() {
  etcd::AlarmRequest request;
  request.set_action(etcd::AlarmRequest::GET);
  etcd::AlarmResponse response;
  VERDICT_RETURN_IF_ERROR(state_->Call("/v3/maintenance/alarm", request, &response));
  return std::any_of(response.alarms().begin(), response.alarms().end(),
                     [](const etcd::AlarmMember& m) { return m.alarm() == etcd::NOSPACE; });
}

Status ParseEtcdUrl(std::string_view url, EtcdOptions* options) {
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme)) {
    return InvalidArgumentError("an etcd cluster is etcd://HOST:PORT[,HOST:PORT...], got '" +
                                std::string(url) + "'");
  }
  std::vector<std::string> endpoints;
  std::string_view rest = url.substr(kScheme.size());
  while (true) {
    const size_t comma = rest.find(',');
    std::string endpoint(rest.substr(0, comma));
    if (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    std::string host;
    uint16_t port = 0;
    if (!ParseHostPort(endpoint, &host, &port) || port == 0) {
      return InvalidArgumentError("etcd endpoint '" + endpoint + "' in '" + std::string(url) +
                                  "' is not HOST:PORT");
    }
    endpoints.push_back(endpoint);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  options->endpoints = std::move(endpoints);
  return Status::Ok();
}

}  // namespace verdict::replication

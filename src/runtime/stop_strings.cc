#include "runtime/stop_strings.h"

#include <algorithm>

namespace ponder {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(std::move(stops[i]));
    original_index_.push_back(static_cast<int>(i));
  }
}

const std::string& StopStrings::stop_string() const {
  static const std::string kNone;
  if (stop_index_ < 0) return kNone;
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (original_index_[i] == stop_index_) return stops_[i];
  }
  return kNone;
}

std::string_view StopStrings::push(std::string_view piece) {
  out_.clear();
  if (stopped()) return out_;
  pending_.append(piece);

  // The earliest stop string wins; at the same position, the one listed first. A match can only
  // start in pending_: anything that could have begun one was held back.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      stop_index_ = original_index_[i];
    }
  }
  if (best_pos != std::string::npos) {
    out_.assign(pending_, 0, best_pos);
    pending_.clear();
    return out_;
  }

  // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out_.assign(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out_;
}

std::string_view StopStrings::flush() {
  out_.clear();
  if (!stopped()) out_.swap(pending_);
  pending_.clear();
  return out_;
}

}  // namespace ponder

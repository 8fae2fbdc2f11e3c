#pragma once
// TrainEvent: how the trainer's parts report one line of text ("loading corpus …",
// "warning: …") to the run's sinks. The trainer hands its parts a function that forwards
// rank 0's lines and drops the other ranks', so a part may call it on every rank.

#include <functional>
#include <string>

namespace mok {

using TrainEvent = std::function<void(const std::string& text)>;

}  // namespace mok

// The ringd::Pair handed to Context for one peer of the ibverbs transport: a thin handle on the
// Channel that does the work (channel.h, transport/channel_pair.h). Destroying it gives a pending
// abort notice a moment to reach the peer, then closes the channel.
#pragma once

#include "transport/channel_pair.h"
#include "transport/ibverbs/channel.h"

namespace ringd::ibverbs {

using IbPair = ChannelPair<Channel>;

}  // namespace ringd::ibverbs

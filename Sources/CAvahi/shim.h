// The Avahi client API (libavahi-client, libavahi-common) as plait's Swift code sees it.
//
// Nothing here needs a shim yet: the variadic functions Swift cannot call
// (`avahi_entry_group_add_service`, `avahi_entry_group_update_service_txt`,
// `avahi_string_list_new`) all have `_strlst` or list-building forms that plait uses instead.

#ifndef PLAIT_CAVAHI_SHIM_H
#define PLAIT_CAVAHI_SHIM_H

#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/address.h>
#include <avahi-common/alternative.h>
#include <avahi-common/defs.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/timeval.h>
#include <avahi-common/watch.h>

#endif

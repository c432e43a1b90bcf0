/* store_internal.h - what the modules of store/ share: the database handle
 * of the cache, which the profile store uses for its own tables. Not for
 * use outside symbolizer/store/. */
#pragma once

#include <sqlite3.h>

#include "cache.h"

/* Borrowed; valid until cache_close. */
sqlite3 *cache_db(struct cache *c);

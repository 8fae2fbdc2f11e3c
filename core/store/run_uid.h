#pragma once
// A run's identity across stores (runs.uid, schema 3). Local ids are per store: a run copied
// from a cluster's store into a laptop's gets a new id there, but keeps its uid, which is how
// a second import knows it has the run already.

#include <string>

namespace mok {

// A random UUID (version 4, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"): create_run's uid.
std::string new_run_uid();

// The uid of a run created before schema 3, as an SQL expression over its runs row: derived
// from what never changes about it (its creation time in µs and its id in the store that
// created it), so it is the same read from an old store as it is and after that store was
// upgraded (migration 3 fills the column with it).
inline constexpr const char* kLegacyRunUidSql =
    "('legacy-' || CAST(round(created_at * 1000000) AS INTEGER) || '-' || id)";

}  // namespace mok

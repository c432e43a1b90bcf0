/* check_unwind_table.c - see check_unwind_table.h. */
#include <stdlib.h>

#include "check_unwind_table.h"

void check_unwind_table(const struct unwind_table *t)
{
	size_t n, size;
	const struct sonde_unwind_row *rows = unwind_table_rows(t, &n);
	struct sonde_unwind_row r;
	struct unwind_table *u;
	void *blob;

	for (size_t i = 1; i < n; i++)
		if (rows[i].pc <= rows[i - 1].pc)
			abort();
	for (size_t i = 0; i < n && i < 64; i++)
		if (unwind_table_lookup(t, rows[i].pc, &r) != 0 || r.pc != rows[i].pc)
			abort();
	blob = unwind_table_serialize(t, &size);
	if (!blob)
		return;
	u = unwind_table_deserialize(blob, size);
	if (!u || unwind_table_count(u) != n)
		abort(); /* our own blob must always load */
	unwind_table_free(u);
	free(blob);
}

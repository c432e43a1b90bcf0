/* php_layout.h - the Zend engine's structure offsets the BPF PHP walker
 * needs (bpf/php.h), per PHP version, and the version from an
 * interpreter's file name (php8.2, php-fpm8.2, php-cgi8.2, libphp8.2.so).
 * docs/interpreters.md ("PHP") says how each table was checked.
 */
#pragma once

#include "php.h" /* bpf/: struct sonde_php_offsets */

/* The offsets for PHP major.minor (flags included), or NULL when there is
 * no table for that version. Static. */
const struct sonde_php_offsets *php_layout_for(unsigned major, unsigned minor);

/* The version a PHP interpreter's file name says: 0 with *major, *minor,
 * or -ENOENT (not such a name). Only the basename is looked at. */
int php_version_from_name(const char *path, unsigned *major, unsigned *minor);

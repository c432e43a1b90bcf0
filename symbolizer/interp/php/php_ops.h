/* php_ops.h - PHP 8.2 (the Zend engine, non-ZTS) as an entry of the
 * interpreter ops table (interp_ops.h): files named php8.X, php-fpm8.X,
 * php-cgi8.X or libphp8.X.so whose dynamic symbols include
 * executor_globals, the walker's offsets (php_layout.h, bpf/php.h),
 * function records (php_func.h) and frame words (SONDE_PHP_FRAME;
 * words[1], when present, a function checksum to match). Runs of PHP
 * frames replace execute_ex frames.
 */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops php_ops;

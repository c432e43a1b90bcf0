/* uprobe_cost.c - calls one tiny function in a loop and prints the time
 * per call, so that tests/bench/uprobe_cost.sh can compare the cost of a
 * uprobe hit by the instruction it sits on: the kernel emulates some
 * instructions (conditional jumps, nops, push) and single-steps the rest
 * out of line, which takes a second trap.
 *
 *   uprobe_cost KIND CALLS      KIND: cmp jbe nop push ret mov nop5 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each function starts with the instruction it is named for. cmp is Go's
 * stack check (cmp 16(%r14), %rsp); r14 points at zeros, so the jbe after
 * it is never taken. */
#define FN(name, body)                                                   \
	__asm__(".text\n.globl " #name "\n.type " #name ",@function\n" #name \
		":\n" body "\n.size " #name ", .-" #name "\n")
FN(uc_cmp, "cmpq 16(%r14), %rsp\n jbe 1f\n 1: ret");
FN(uc_jbe, "jbe 1f\n 1: ret");
FN(uc_nop, "nop\n ret");
FN(uc_push, "push %rbp\n pop %rbp\n ret");
FN(uc_ret, "ret");
FN(uc_mov, "mov %rsp, %rax\n ret");
FN(uc_nop5, ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n ret");
void uc_cmp(void), uc_jbe(void), uc_nop(void), uc_push(void), uc_ret(void), uc_mov(void),
	uc_nop5(void);

int main(int argc, char **argv)
{
	static const struct {
		const char *kind;
		void (*fn)(void);
	} fns[] = {
		{ "cmp", uc_cmp }, { "jbe", uc_jbe }, { "nop", uc_nop }, { "push", uc_push },
		{ "ret", uc_ret }, { "mov", uc_mov }, { "nop5", uc_nop5 },
	};
	static long zeros[4];
	void (*fn)(void) = NULL;
	struct timespec a, b;
	long n;

	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: uprobe_cost cmp|jbe|nop|push|ret|mov|nop5 CALLS\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(argv[1], fns[i].kind))
			fn = fns[i].fn;
	if (!fn) {
		fprintf(stderr, "uprobe_cost: unknown kind %s\n", argv[1]);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		__asm__ volatile("mov %0, %%r14\n\tcall *%1"
				 :
				 : "r"(zeros), "r"(fn)
				 : "r14", "rax", "memory", "cc");
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
	return 0;
}

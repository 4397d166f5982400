/* SPDX-License-Identifier: MIT */
/*
 * The timer-backend registry (tl_timer_backend_register, _names, _find):
 * the built-ins listed and found, a custom backend written here (a sorted
 * list) registered, held to the conformance harness's rules and run by a
 * loop, and invalid backends refused.
 */
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend_params.h"
#include "timer_harness.h"

#include <tickloop/tickloop.h>

/* ------------------------------------------------------------------------ */
/* The registry, with a custom backend written here                         */
/* ------------------------------------------------------------------------ */

namespace {

/* A sorted doubly linked list: link[0] next, link[1] prev. Equal deadlines
 * keep insertion order, so it says TL_TIMER_CAP_EXACT and the harness holds
 * it to the exact rules, as it does the heaps. No reschedule, so the loop's
 * remove + insert fallback is exercised too. */
struct SortedList {
    tl_timer *head = nullptr;
    tl_timer *tail = nullptr;
    size_t n = 0;
};

tl_timer *next_of(const tl_timer *t) {
    return reinterpret_cast<tl_timer *>(t->link[0]);
}
tl_timer *prev_of(const tl_timer *t) {
    return reinterpret_cast<tl_timer *>(t->link[1]);
}
void set_next(tl_timer *t, tl_timer *next) {
    t->link[0] = reinterpret_cast<uintptr_t>(next);
}
void set_prev(tl_timer *t, tl_timer *prev) {
    t->link[1] = reinterpret_cast<uintptr_t>(prev);
}

void *list_create(const tl_timer_config *, uint64_t) {
    return new SortedList();
}
void list_destroy(void *self) {
    delete static_cast<SortedList *>(self);
}

int list_insert(void *self, tl_timer *t) {
    SortedList *l = static_cast<SortedList *>(self);
    tl_timer *after = l->tail;
    while (after && after->deadline > t->deadline) after = prev_of(after);
    tl_timer *before = after ? next_of(after) : l->head;
    set_prev(t, after);
    set_next(t, before);
    if (before)
        set_prev(before, t);
    else
        l->tail = t;
    if (after)
        set_next(after, t);
    else
        l->head = t;
    ++l->n;
    return 0;
}

void list_remove(void *self, tl_timer *t) {
    SortedList *l = static_cast<SortedList *>(self);
    if (prev_of(t))
        set_next(prev_of(t), next_of(t));
    else
        l->head = next_of(t);
    if (next_of(t))
        set_prev(next_of(t), prev_of(t));
    else
        l->tail = prev_of(t);
    --l->n;
}

uint64_t list_next_expiry(void *self) {
    SortedList *l = static_cast<SortedList *>(self);
    return l->head ? l->head->deadline : UINT64_MAX;
}

tl_timer *list_pop_expired(void *self, uint64_t now) {
    SortedList *l = static_cast<SortedList *>(self);
    tl_timer *t = l->head;
    if (!t || t->deadline > now) return nullptr;
    list_remove(self, t);
    return t;
}

size_t list_count(void *self) {
    return static_cast<SortedList *>(self)->n;
}

const tl_timer_backend sorted_list_backend = {
    "test_sorted_list",
    list_create,
    list_destroy,
    list_insert,
    list_remove,
    nullptr,
    list_next_expiry,
    list_pop_expired,
    list_count,
    TL_TIMER_CAP_EXACT,
    nullptr,
    nullptr,
    {},
};

bool names_contain(const char *name) {
    const char *names[BACKEND_PARAMS_MAX];
    size_t n = tl_timer_backend_names(names, BACKEND_PARAMS_MAX);
    for (size_t i = 0; i < n && i < BACKEND_PARAMS_MAX; ++i)
        if (std::strcmp(names[i], name) == 0) return true;
    return false;
}

} // namespace

Test(timers, registry_lists_and_finds_the_builtins) {
    size_t total = tl_timer_backend_names(nullptr, 0);
    cr_assert(total >= 2, "tl_timer_backend_names(NULL, 0) = %zu", total);
    const char *names[BACKEND_PARAMS_MAX + 1];
    cr_assert(tl_timer_backend_names(names, BACKEND_PARAMS_MAX) == total);
    cr_assert(std::strcmp(names[0], "heap2") == 0 || names_contain("heap2"), "heap2 missing");
    cr_assert(names_contain("heap4"), "heap4 missing");
    for (size_t i = 0; i < total; ++i) {
        const tl_timer_backend *b = tl_timer_backend_find(names[i]);
        cr_assert(b && std::strcmp(b->name, names[i]) == 0, "find(\"%s\")", names[i]);
        for (size_t j = 0; j < i; ++j)
            cr_assert(std::strcmp(names[i], names[j]) != 0, "\"%s\" listed twice", names[i]);
    }
    /* cap bounds what is stored, not what is returned. */
    const char *one[2] = {nullptr, "sentinel"};
    cr_assert(tl_timer_backend_names(one, 1) == total);
    cr_assert(one[0] != nullptr && std::strcmp(one[1], "sentinel") == 0,
              "names(cap 1) wrote past cap");
    cr_assert(tl_timer_backend_find("no_such_backend") == nullptr);
    cr_assert(tl_timer_backend_find("") == nullptr);
    cr_assert(tl_timer_backend_find(nullptr) == nullptr);
}

Test(timers, register_custom_backend) {
    size_t before = tl_timer_backend_names(nullptr, 0);
    cr_assert(tl_timer_backend_find(sorted_list_backend.name) == nullptr);
    cr_assert(tl_timer_backend_register(&sorted_list_backend) == 0);
    cr_assert(tl_timer_backend_find(sorted_list_backend.name) == &sorted_list_backend);
    size_t after = tl_timer_backend_names(nullptr, 0);
    cr_assert(after == before + 1, "names: %zu before, %zu after", before, after);
    const char *names[BACKEND_PARAMS_MAX];
    tl_timer_backend_names(names, BACKEND_PARAMS_MAX);
    cr_assert(std::strcmp(names[after - 1], sorted_list_backend.name) == 0,
              "custom backends come after the built-ins, in registration order");

    /* Duplicates, by the same object or by name alone, built-ins included. */
    cr_assert(tl_timer_backend_register(&sorted_list_backend) == -EEXIST);
    tl_timer_backend twin = sorted_list_backend;
    cr_assert(tl_timer_backend_register(&twin) == -EEXIST);
    twin.name = "heap2";
    cr_assert(tl_timer_backend_register(&twin) == -EEXIST);
    cr_assert(tl_timer_backend_find("heap2") != &twin);
    cr_assert(tl_timer_backend_names(nullptr, 0) == after);
}

Test(timers, register_rejects_invalid_backends) {
    cr_assert(tl_timer_backend_register(nullptr) == -EINVAL);
    size_t before = tl_timer_backend_names(nullptr, 0);
    tl_timer_backend b = sorted_list_backend;
    b.name = nullptr;
    cr_assert(tl_timer_backend_register(&b) == -EINVAL, "NULL name");
    b.name = "";
    cr_assert(tl_timer_backend_register(&b) == -EINVAL, "empty name");
    static const char long_name[] =
        "a_name_of_sixty_four_characters_which_is_over_the_limit_xxxxxxxx";
    static_assert(sizeof long_name - 1 == 64, "64 characters");
    b.name = long_name;
    cr_assert(tl_timer_backend_register(&b) == -EINVAL, "over-long name");

    /* Each required function pointer, one at a time. */
    struct Field {
        const char *what;
        void (*clear)(tl_timer_backend *);
    };
    const Field fields[] = {
        {"create", [](tl_timer_backend *x) { x->create = nullptr; }},
        {"destroy", [](tl_timer_backend *x) { x->destroy = nullptr; }},
        {"insert", [](tl_timer_backend *x) { x->insert = nullptr; }},
        {"remove", [](tl_timer_backend *x) { x->remove = nullptr; }},
        {"next_expiry", [](tl_timer_backend *x) { x->next_expiry = nullptr; }},
        {"pop_expired", [](tl_timer_backend *x) { x->pop_expired = nullptr; }},
        {"count", [](tl_timer_backend *x) { x->count = nullptr; }},
    };
    for (const Field &f : fields) {
        b = sorted_list_backend;
        b.name = "test_missing_function";
        f.clear(&b);
        cr_assert(tl_timer_backend_register(&b) == -EINVAL, "missing %s", f.what);
    }
    cr_assert(tl_timer_backend_names(nullptr, 0) == before, "a rejected backend was listed");
    cr_assert(tl_timer_backend_find("test_missing_function") == nullptr);

    /* Reserved words are where later optional operations go: a non-zero one
       would be taken for an operation by a later library (docs/abi.md). */
    for (size_t i = 0; i < sizeof b.reserved / sizeof b.reserved[0]; ++i) {
        b = sorted_list_backend;
        b.name = "test_reserved_word";
        b.reserved[i] = &b;
        cr_assert(tl_timer_backend_register(&b) == -EINVAL, "reserved[%zu] set", i);
    }
    cr_assert(tl_timer_backend_find("test_reserved_word") == nullptr);
    cr_assert_eq(sizeof(tl_timer_backend), (size_t)TL_TIMER_BACKEND_SIZE);

    /* A capability this library does not know is a promise nobody checks. */
    b = sorted_list_backend;
    b.name = "test_unknown_caps";
    b.caps = TL_TIMER_CAP_EXACT | 0x80000000u;
    cr_assert(tl_timer_backend_register(&b) == -EINVAL, "unknown caps bit");
    cr_assert(tl_timer_backend_find("test_unknown_caps") == nullptr);

    /* next_wakeup is optional too (sorted_list_backend leaves it NULL) and
       accepted when set (here: next_expiry, the tightest it may be), but
       never in place of a reserved word. */
    for (size_t i = 0; i < sizeof b.reserved / sizeof b.reserved[0]; ++i) {
        b = sorted_list_backend;
        b.name = "test_wakeup_and_reserved";
        b.next_wakeup = list_next_expiry;
        b.reserved[i] = &b;
        cr_assert(tl_timer_backend_register(&b) == -EINVAL, "next_wakeup and reserved[%zu] set", i);
    }
    static tl_timer_backend with_wakeup = sorted_list_backend;
    with_wakeup.name = "test_with_next_wakeup";
    with_wakeup.next_wakeup = list_next_expiry;
    cr_assert(tl_timer_backend_register(&with_wakeup) == 0);
    cr_assert(tl_timer_backend_find("test_with_next_wakeup") == &with_wakeup);

    /* reschedule is optional (sorted_list_backend leaves it NULL). */
    static tl_timer_backend optional = sorted_list_backend;
    optional.name = "test_without_reschedule";
    cr_assert(tl_timer_backend_register(&optional) == 0);
}

Test(timers, builtins_state_their_capabilities) {
    /* The heaps promise exact order, the wheels tick order; tests and the
       loop read this field, so it must say what the conformance suite checks. */
    cr_assert(tl_timer_backend_find("heap2")->caps == TL_TIMER_CAP_EXACT);
    cr_assert(tl_timer_backend_find("heap4")->caps == TL_TIMER_CAP_EXACT);
    cr_assert(tl_timer_backend_find("wheel")->caps == 0);
    cr_assert(tl_timer_backend_find("hwheel")->caps == 0);
}

Test(timers, custom_backend_without_caps_is_held_to_tick_order) {
    /* The same structure registered with caps 0 (what a backend written
       before the field existed gets): the harness checks the tick rules,
       which an exact structure keeps too. */
    static tl_timer_backend plain = sorted_list_backend;
    plain.name = "test_sorted_list_plain";
    plain.caps = 0;
    cr_assert(tl_timer_backend_register(&plain) == 0);
    Harness h(plain.name, kBigStart);
    cr_assert(!h.exact());
    std::vector<Item> items = make_items(100);
    Rng rng{5};
    for (Item &it : items) h.insert(it, kBigStart + rng.below(50 * kTick));
    cr_assert(h.drain_all().size() == 100);
}

Test(timers, custom_backend_passes_the_harness) {
    /* The harness itself, on a backend whose order is known to be right. */
    cr_assert(tl_timer_backend_register(&sorted_list_backend) == 0);
    Harness h(sorted_list_backend.name, kBigStart);
    cr_assert(h.exact(), "caps say exact: held to the heaps' rules");
    std::vector<Item> items = make_items(200);
    Rng rng{3};
    for (Item &it : items) h.insert(it, kBigStart + rng.below(100 * kTick));
    h.reschedule(items[5], kBigStart + 2 * kTick);
    h.remove(items[6]);
    std::vector<Item *> got = h.drain_all();
    cr_assert(got.size() == 199);
}

namespace {

tl_timer loop_timers[3];
int fired_order[8];
int fired_n;

void record_fire(tl_loop *loop, tl_timer *t) {
    cr_assert(tl_now(loop) >= t->deadline, "fired early");
    if (fired_n < 8) fired_order[fired_n] = (int)(t - loop_timers);
    ++fired_n;
}

} // namespace

Test(timers, loop_runs_a_custom_backend) {
    cr_assert(tl_timer_backend_register(&sorted_list_backend) == 0);
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = sorted_list_backend.name;
    tl_loop *loop = nullptr;
    int r = tl_loop_new(&loop, &opts);
    cr_assert(r == 0, "tl_loop_new: %s", tl_strerror(r));
    cr_assert(std::strcmp(tl_loop_timers_name(loop), sorted_list_backend.name) == 0);

    /* Three one-shots at 3, 1 and 2 ms, then the 3 ms one restarted at 4 ms
       (reschedule is NULL: the loop removes and inserts). */
    tl_timer *t = loop_timers;
    for (int i = 0; i < 3; ++i) tl_timer_init(&t[i], record_fire, nullptr);
    cr_assert(tl_timer_start(loop, &t[0], 3 * kTick, 0) == 0);
    cr_assert(tl_timer_start(loop, &t[1], 1 * kTick, 0) == 0);
    cr_assert(tl_timer_start(loop, &t[2], 2 * kTick, 0) == 0);
    cr_assert(tl_timer_start(loop, &t[0], 4 * kTick, 0) == 0);
    cr_assert(tl_timer_active(&t[0]) == 1);
    uint64_t deadline0 = t[0].deadline;
    cr_assert(tl_loop_run(loop, TL_RUN_DEFAULT) == 0);
    cr_assert(fired_n == 3, "%d callbacks", fired_n);
    cr_assert(fired_order[0] == 1 && fired_order[1] == 2 && fired_order[2] == 0,
              "fired in order %d %d %d", fired_order[0], fired_order[1], fired_order[2]);
    cr_assert(tl_now(loop) >= deadline0);
    tl_loop_stats stats;
    tl_loop_stats_get(loop, &stats);
    cr_assert(stats.timers_fired == 3 && stats.timers_active == 0);
    cr_assert(tl_loop_free(loop) == 0);
}

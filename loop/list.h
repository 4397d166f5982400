/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the intrusive lists of the loop's handles (`next` and
 * `prev` fields in the handle): NULL-terminated lists (list_push,
 * list_unlink, list_contains) and the start-ordered OrderedList.
 */
#ifndef TICKLOOP_LOOP_LIST_H
#define TICKLOOP_LOOP_LIST_H

namespace tl::detail {

/* The intrusive lists of asyncs and signal watchers (`next`/`prev` fields).
 * Dispatch walks one with a cursor that unlink advances, so a callback may
 * unlink (and free) any node, the one running included. */
template <class Node>
void list_push(Node *&head, Node *node) noexcept {
    node->prev = nullptr;
    node->next = head;
    if (head) head->prev = node;
    head = node;
}

template <class Node>
void list_unlink(Node *&head, Node *&cursor, Node *node) noexcept {
    if (cursor == node) cursor = node->next;
    if (node->prev)
        node->prev->next = node->next;
    else
        head = node->next;
    if (node->next) node->next->prev = node->prev;
    node->next = node->prev = nullptr;
}

/* A list kept in start order (append at the tail), for the handles whose
 * callbacks must run in start order: asyncs and hooks. Same cursor rule as
 * above. */
template <class Node>
struct OrderedList {
    Node *head = nullptr, *tail = nullptr;
    Node *cursor = nullptr; /* next node to visit during dispatch */

    void append(Node *node) noexcept {
        node->next = nullptr;
        node->prev = tail;
        if (tail)
            tail->next = node;
        else
            head = node;
        tail = node;
    }
    void unlink(Node *node) noexcept {
        if (cursor == node) cursor = node->next;
        if (node->prev)
            node->prev->next = node->next;
        else
            head = node->next;
        if (node->next)
            node->next->prev = node->prev;
        else
            tail = node->prev;
        node->next = node->prev = nullptr;
    }
};

template <class Node>
bool list_contains(const Node *head, const Node *node) noexcept {
    for (; head; head = head->next)
        if (head == node) return true;
    return false;
}

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_LIST_H */

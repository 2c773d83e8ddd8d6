//! Producer lists: for every gradient slot, the set of recorded ops that will still send a
//! gradient into it. An intrusive doubly linked list in an arena with index links, so insert
//! and unlink are O(1) and nothing is allocated per node once the arena has grown.

const NIL: u32 = u32::MAX;

/// Handle of one list (one gradient slot).
pub(crate) type ListId = u32;
/// Handle of one node (one producer registered in one list).
pub(crate) type NodeId = u32;

#[derive(Clone, Copy)]
struct Node {
    prev: u32,
    next: u32,
    list: u32,
}

/// Every producer list of one `GradKey`.
#[derive(Default, Clone)]
pub(crate) struct ProducerLists {
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    heads: Vec<u32>,
    free_heads: Vec<u32>,
}

impl ProducerLists {
    /// A new empty list.
    pub(crate) fn new_list(&mut self) -> ListId {
        match self.free_heads.pop() {
            Some(l) => {
                self.heads[l as usize] = NIL;
                l
            }
            None => {
                self.heads.push(NIL);
                (self.heads.len() - 1) as u32
            }
        }
    }

    /// Returns a list's id to the arena. Its nodes must already be unlinked.
    pub(crate) fn free_list(&mut self, l: ListId) {
        // (not checked while a panic unwinds: a second panic in a destructor would abort)
        debug_assert!(
            std::thread::panicking() || self.heads[l as usize] == NIL,
            "freeing a producer list that is not empty"
        );
        self.free_heads.push(l);
    }

    /// Registers a producer at the front of list `l`.
    pub(crate) fn push(&mut self, l: ListId) -> NodeId {
        let head = self.heads[l as usize];
        let node = Node {
            prev: NIL,
            next: head,
            list: l,
        };
        let id = match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if head != NIL {
            self.nodes[head as usize].prev = id;
        }
        self.heads[l as usize] = id;
        id
    }

    /// Removes a producer from its list.
    pub(crate) fn unlink(&mut self, n: NodeId) {
        let Node { prev, next, list } = self.nodes[n as usize];
        if prev == NIL {
            self.heads[list as usize] = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        self.free_nodes.push(n);
    }

    /// Whether no producer is left: the slot's gradient is final.
    pub(crate) fn is_empty(&self, l: ListId) -> bool {
        self.heads[l as usize] == NIL
    }

    #[cfg(test)]
    fn len(&self, l: ListId) -> usize {
        let mut n = 0;
        let mut cur = self.heads[l as usize];
        while cur != NIL {
            n += 1;
            cur = self.nodes[cur as usize].next;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlink_in_any_order_empties_the_list() {
        let mut p = ProducerLists::default();
        let a = p.new_list();
        let b = p.new_list();
        let n1 = p.push(a);
        let n2 = p.push(a);
        let n3 = p.push(a);
        let m1 = p.push(b);
        assert_eq!(p.len(a), 3);
        p.unlink(n2);
        assert_eq!(p.len(a), 2);
        p.unlink(n3);
        assert!(!p.is_empty(a));
        p.unlink(n1);
        assert!(p.is_empty(a));
        assert!(!p.is_empty(b));
        p.unlink(m1);
        assert!(p.is_empty(b));
    }

    #[test]
    fn freed_nodes_and_lists_are_reused() {
        let mut p = ProducerLists::default();
        let a = p.new_list();
        let n = p.push(a);
        p.unlink(n);
        p.free_list(a);
        let b = p.new_list();
        assert_eq!(a, b);
        assert!(p.is_empty(b));
        assert_eq!(p.push(b), n);
        assert_eq!(p.nodes.len(), 1);
    }
}

// Reads {"types": [...leaf types], "sets": [[value, ...], ...]} on stdin; for each leaf set prints
// {root, proofs: [proof of value 0, proof of value 1, ...]} from @openzeppelin/merkle-tree.
const { StandardMerkleTree } = require("@openzeppelin/merkle-tree");

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { types, sets } = JSON.parse(input);
  const out = sets.map((values) => {
    const tree = StandardMerkleTree.of(values, types);
    return { root: tree.root, proofs: values.map((_, i) => tree.getProof(i)) };
  });
  process.stdout.write(JSON.stringify(out));
});

// Reads [[[index, "0x..bytes32"], ...], ...] (leaf sets) on stdin; for each set prints
// {root, proofs: [proof of value 0, proof of value 1, ...]} from @openzeppelin/merkle-tree.
const { StandardMerkleTree } = require("@openzeppelin/merkle-tree");

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const sets = JSON.parse(input);
  const out = sets.map((values) => {
    const tree = StandardMerkleTree.of(values, ["uint256", "bytes32"]);
    return { root: tree.root, proofs: values.map((_, i) => tree.getProof(i)) };
  });
  process.stdout.write(JSON.stringify(out));
});
